import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { modelOf, postCompletion } from "../api-client.js";
import { waitFor } from "../e2e/helpers.js";
import { pair } from "./helpers.js";

interface PeerRow {
  id: string;
  estimateTokens: number;
  estimateAgeMs: number | null | undefined;
}

/**
 * gossip "scuttlebutt" has no per-pair heartbeats (SWIM carries liveness), so the full mesh's "since
 * last heard" is not there: the estimate's age is the time since its newest state arrived or the
 * member's own digest named the version held (that it does not grow while the member is idle:
 * idle-peer-estimate-age.test.ts).
 */
describe("a peer's estimate age with gossip scuttlebutt (two in-process nodes)", () => {
  let a: NodeHandle;
  let b: NodeHandle;
  beforeAll(async () => {
    [a, b] = await pair({ pollMs: "100", gossip: "scuttlebutt" });
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it("is on /cluster and /metrics once B's state reached A", async () => {
    const model = await modelOf(b.apiUrl);
    const prefix = Array.from({ length: 300 }, (_, i) => `age${i}`).join(" ");
    expect((await postCompletion(b.apiUrl, { model, prompt: prefix, max_tokens: 1 })).status).toBe(200);
    const ofB = async () =>
      ((await (await fetch(`${a.apiUrl}/cluster`)).json()) as { peers: PeerRow[] }).peers.find(
        (p) => p.id === "B",
      );
    await waitFor(async () => ((await ofB())?.estimateTokens ?? 0) >= 256, 15_000, "A to hold B's estimate");
    const first = (await ofB())?.estimateAgeMs;
    expect(typeof first).toBe("number");
    const metrics = await (await fetch(`${a.apiUrl}/metrics`)).text();
    expect(metrics).toMatch(/prefixmesh_peer_estimate_age_seconds\{[^}]*peer="B"[^}]*\} \d/);
  });
});
