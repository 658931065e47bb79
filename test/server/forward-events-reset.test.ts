/**
 * prefixmesh_forward_events counts on across a cache reset (cluster-view.ts `keepCounts`): the node's
 * own counts start over with its new epoch, and a counter that fell would read as a counter reset.
 */
import { describe, expect, it } from "vitest";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { postCompletion } from "../api-client.js";
import { nodesStoppedAfterEach, routedPair } from "./helpers.js";

const stopped = nodesStoppedAfterEach();

async function forwarded(node: NodeHandle): Promise<number | undefined> {
  const metrics = await (await fetch(`${node.apiUrl}/metrics`)).text();
  const m = /prefixmesh_forward_events\{[^}]*event="forwarded"[^}]*\} (\d+)/.exec(metrics);
  return m ? Number(m[1]) : undefined;
}

describe("prefixmesh_forward_events across a cache reset", () => {
  it("keeps the counts of the epoch before it", async () => {
    const prefix = Array.from({ length: 300 }, (_, i) => `reset${i}`).join(" ");
    const { a, model } = await routedPair(prefix, {}, { onStart: (x, y) => void [x, y].map(stopped) });
    const res = await postCompletion(a.apiUrl, { model, prompt: `${prefix} asked`, max_tokens: 1 });
    expect(res.headers.get("x-prefixmesh-served-by")).toBe("B");
    await res.text();
    expect(await forwarded(a)).toBe(1);

    const reset = await fetch(`${a.apiUrl}/admin/reset-cache`, { method: "POST" });
    expect(reset.status).toBe(200);
    // The node's own count started over with the reset; the metric did not.
    expect(a.runtime.clusterView().stats.forwarded).toBe(0);
    expect(await forwarded(a)).toBe(1);
  }, 60_000);
});
