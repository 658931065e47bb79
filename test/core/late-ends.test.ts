/**
 * A late stream that ends by its peer's own word rather than an answer (forward-attempts.ts
 * `endsLate`): past its first deadline, kept open by its streamed output, a refusal for load or a
 * goodbye marks the peer late as its answer then would have (trust.ts `late`), once per attempt; the
 * same endings within the first deadline, and endings that are not the peer's word (it is removed
 * from the membership), mark nothing.
 */
import { describe, expect, it } from "vitest";
import type { PeerMessage } from "../../src/core/node/types.js";
import { LATE_MS, latePair, ON_TIME_MS, streamFromB } from "./late-stream.js";
import { daemonGossip, type Harness } from "./node-harness.js";

const fromB = (h: Harness, msg: PeerMessage) => h.input("A", { type: "peer-message", from: "B", msg });
const trustOfB = (h: Harness) =>
  h
    .node("A")
    .peers()
    .find((p) => p.id === "B")?.trust;

/** B's refusals of attempt 1 of `reqId` for load: by the run's fault, and by a drain's words. */
const LOAD_REFUSALS = [{ error: "engine: rate limited", fault: "load" }, { error: "shutting down" }] as const;

/** B's run of A's request, answered after A moved on: it still reaches A (progress, no mark). */
function finishB(h: Harness): void {
  h.finishRuns("B");
  h.deliver();
}

describe("a late stream that ends by its peer's refusal or goodbye", () => {
  for (const refusal of LOAD_REFUSALS)
    it(`refused for load (${refusal.error}): late, backed off; within its deadline only backed off`, () => {
      for (const [ms, late] of [
        [LATE_MS, 1],
        [ON_TIME_MS, 0],
      ] as const) {
        const h = latePair();
        expect(streamFromB(h, "r1", 1, ms)).toBe(true);
        fromB(h, { type: "error", reqId: "r1", attempt: 1, retryable: true, ...refusal });
        expect(h.node("A").stats()).toMatchObject({ fallbacks: 1, peerErrors: 0 });
        expect(trustOfB(h)).toMatchObject({ failures: late, late, refusals: 1 });
        // Its answer after all, to an attempt that is over: progress, no second mark.
        finishB(h);
        expect(trustOfB(h)).toMatchObject({ failures: late, late, refusals: 1 });
      }
    });

  it("a goodbye: late once, its drain's refusal and answer after it no second mark; within, none", () => {
    for (const [ms, late] of [
      [LATE_MS, 1],
      [ON_TIME_MS, 0],
    ] as const) {
      const h = latePair();
      expect(streamFromB(h, "r1", 1, ms)).toBe(true);
      fromB(h, { type: "goodbye" });
      expect(h.node("A").stats().fallbacks).toBe(1);
      expect(trustOfB(h)).toMatchObject({ failures: late, late, refusals: 0 });
      fromB(h, { type: "error", reqId: "r1", attempt: 1, retryable: true, error: "shutting down" });
      finishB(h);
      expect(trustOfB(h)).toMatchObject({ failures: late, late, refusals: 0 });
    }
  });

  it("gossip scuttlebutt: SWIM's leave marks a late stream once, as a goodbye does; within, none", () => {
    for (const [ms, late] of [
      [LATE_MS, 1],
      [ON_TIME_MS, 0],
    ] as const) {
      const h = daemonGossip(["A", "B"], 250, { trustMaxUnanswered: 3 });
      expect(streamFromB(h, "r1", 1, ms)).toBe(true);
      // Its leave removes it from A's membership, its trust only once its requests moved on.
      h.apply("B", h.node("B").goodbye());
      h.deliverMesh();
      expect(h.node("A").stats().fallbacks).toBe(1);
      const kept = () =>
        h
          .node("A")
          .departedTrust(10)
          .peers.find((p) => p.id === "B")?.trust;
      expect(kept()).toMatchObject({ failures: late, late, refusals: 0 });
      finishB(h);
      expect(kept()).toMatchObject({ failures: late, late, refusals: 0 });
    }
  });

  it("a peer removed from the membership mid-stream is no mark: not its word", () => {
    const h = latePair();
    expect(streamFromB(h, "r1", 1, LATE_MS)).toBe(true);
    h.apply("A", h.node("A").removePeer("B")); // gone from DNS, say
    expect(h.node("A").stats().fallbacks).toBe(1);
    const kept = h
      .node("A")
      .departedTrust(10)
      .peers.find((p) => p.id === "B");
    expect(kept?.trust).toMatchObject({ failures: 0, late: 0 });
  });
});
