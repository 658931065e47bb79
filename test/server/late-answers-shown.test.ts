/**
 * A peer's late answers (trust.ts `late`) as an operator sees them: `/cluster` peers[].trust.late and
 * the prefixmesh_peer_late_answers gauge, read from the node as the daemon reads it (cluster-view.ts),
 * so a peer demoted for slowness is told from one demoted for errors.
 */
import { describe, expect, it } from "vitest";
import { createMetrics } from "../../src/server/metrics.js";
import { LATE_MS, latePair, ON_TIME_MS, streamFromB } from "../core/late-stream.js";
import { type Harness, isType } from "../core/node-harness.js";
import { harnessClusterView } from "./helpers.js";

/** B streams A's request for `ms`, then answers it. */
function answerAfter(h: Harness, reqId: string, q: number, ms: number): void {
  expect(streamFromB(h, reqId, q, ms)).toBe(true);
  h.finishRuns("B");
  h.deliver(isType("result"));
  expect(h.repliesFor(reqId)[0]?.record.servedBy).toBe("B");
}

/** A's `/cluster` and `/metrics` (one registry, scraped again each time) as to B's late answers. */
function shownOfB(h: Harness): () => Promise<{ cluster: unknown; metric: number | undefined }> {
  const view = harnessClusterView(h, "A", 10_000);
  const metrics = createMetrics("A", { processMetrics: false });
  metrics.setViewProvider(() => view.gauges());
  return async () => {
    const text = await metrics.registry.metrics();
    expect(text).toContain("# TYPE prefixmesh_peer_late_answers gauge");
    const m = /^prefixmesh_peer_late_answers\{peer="B",node="A"\} (\d+)$/m.exec(text);
    const b = view.cluster(0).peers.find((p) => p.id === "B");
    return { cluster: b?.trust?.late, metric: m ? Number(m[1]) : undefined };
  };
}

describe("late answers shown per peer", () => {
  it("a peer answering past its first deadline moves /cluster's late and the gauge", async () => {
    const h = latePair();
    const shown = shownOfB(h);
    expect(await shown()).toEqual({ cluster: 0, metric: 0 });
    answerAfter(h, "r1", 1, LATE_MS);
    expect(await shown()).toEqual({ cluster: 1, metric: 1 });
    answerAfter(h, "r2", 2, LATE_MS);
    expect(await shown()).toEqual({ cluster: 2, metric: 2 });
    // Counted apart from, and within, its failures.
    expect(harnessClusterView(h, "A", 10_000).cluster(0).peers[0]?.trust).toMatchObject({ failures: 2 });
  });

  it("our cache reset starts the count over: a gauge, since a counter must never fall", async () => {
    const h = latePair();
    const shown = shownOfB(h);
    answerAfter(h, "r1", 1, LATE_MS);
    expect(await shown()).toEqual({ cluster: 1, metric: 1 });
    h.apply("A", h.node("A").restart(h.now));
    expect(await shown()).toEqual({ cluster: 0, metric: 0 });
  });

  it("a peer answering on time moves neither", async () => {
    const h = latePair();
    const shown = shownOfB(h);
    for (let i = 1; i <= 4; i++) answerAfter(h, `r${i}`, i, ON_TIME_MS);
    expect(await shown()).toEqual({ cluster: 0, metric: 0 });
  });
});
