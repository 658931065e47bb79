/**
 * Peer trust at the origin (origin.ts + trust.ts), hand-driven: a peer on probation is sent at most
 * `trustMaxUnanswered` forwards it has not answered, so a staller is demoted after that many
 * unanswered forwards; a peer that answered is off probation; a forward never acked says nothing
 * against the peer, unless it was the half-open probe of a demoted one; a probe refused for fit
 * (peer-limits.ts) frees the probe and costs the peer nothing.
 */
import { describe, expect, it } from "vitest";
import type { Effect } from "../../src/core/node/types.js";
import { forwardsIn, Harness, isType, prompt } from "./node-harness.js";

const FORWARD_TIMEOUT_MS = 5_000;

/** A, B with peer trust; B holds topics 1-5, so A forwards their prompts to B. */
function setup(): Harness {
  const h = new Harness(["A", "B"], {
    peerTrust: true,
    trustMaxUnanswered: 3,
    answerProbes: false,
    forwardTimeoutMs: FORWARD_TIMEOUT_MS,
    forwardAckTimeoutMs: 250,
  });
  for (let t = 1; t <= 5; t++) h.warm("B", `warm${t}`, prompt(t, 0));
  h.gossip(3);
  return h;
}

/** A client request at A; B gets the forward and acks it, and its answers never leave it (a staller). */
function stalled(h: Harness, reqId: string, topic: number): Effect[] {
  const eff = h.client("A", reqId, prompt(topic, Number(reqId.slice(1)) + 10));
  h.deliver((m) => m.msg.type === "forward" || m.msg.type === "forward-ack");
  h.drop((m) => m.from === "B" && (m.msg.type === "result" || m.msg.type === "error"));
  h.advanceLive(50);
  return eff;
}

const trustOfB = (h: Harness) => h.node("A").peers()[0]?.trust;

/** B stalls three forwards, its breaker opens, A's fallbacks run, and the open period ends. */
function demotedThenOpenPeriodOver(): Harness {
  const h = setup();
  for (const i of [1, 2, 3]) stalled(h, `r${i}`, i);
  while (trustOfB(h)?.state !== "open") h.advanceLive(10);
  for (let i = 0; i < 4; i++) {
    h.finishRuns("A");
    h.advance(1);
  }
  h.advanceLive(10_000); // the open period: one forward may probe
  return h;
}

describe("peer trust at the origin: progress", () => {
  it("a staller is sent at most 3 forwards, and demoted when they fail", () => {
    const h = setup();
    const sent = [1, 2, 3, 4, 5].map((i) => forwardsIn(stalled(h, `r${i}`, i)));
    // Three go to B; B answers none, so the next ones do not (they run here).
    expect(sent).toEqual([["B"], ["B"], ["B"], [], []]);
    expect(h.node("A").stats().forwarded).toBe(3);
    expect(trustOfB(h)).toMatchObject({ state: "closed", failures: 0 });
    // Each fails (overdue or timed out) and counts; r1's failure frees no slot (B still
    // has answered nothing), so nothing more goes to B, and the third failure opens its breaker.
    let waited = 0;
    let asked = false;
    while (h.node("A").stats().fallbacks < 3 && waited < FORWARD_TIMEOUT_MS) {
      h.advanceLive(10);
      waited += 10;
      if (h.node("A").stats().fallbacks === 1 && !asked) {
        asked = true;
        expect(forwardsIn(h.client("A", "x", prompt(4, 77)))).toEqual([]);
      }
    }
    expect(asked).toBe(true);
    expect(waited).toBeLessThan(FORWARD_TIMEOUT_MS);
    expect(h.node("A").stats()).toMatchObject({ fallbacks: 3, forwarded: 3 });
    expect(trustOfB(h)).toMatchObject({ state: "open", failures: 3, opened: 1 });
    expect(h.mailbox.filter(isType("cancel")).map((m) => m.msg)).toMatchObject([
      { reqId: "r1" },
      { reqId: "r2" },
      { reqId: "r3" },
    ]);
    // Every request is answered, once, here.
    for (let i = 0; i < 40; i++) {
      h.finishRuns("A");
      h.advance(1);
    }
    for (let i = 1; i <= 5; i++) {
      expect(h.repliesFor(`r${i}`)).toHaveLength(1);
      expect(h.repliesFor(`r${i}`)[0]?.record.servedBy).toBe("A");
    }
  });

  it("a half-open probe never acked keeps the peer demoted (the next request does not probe again)", () => {
    const h = demotedThenOpenPeriodOver();
    expect(forwardsIn(h.client("A", "p1", prompt(4, 40)))).toEqual(["B"]);
    expect(trustOfB(h)?.state).toBe("half-open");
    h.drop(isType("forward"));
    h.advanceLive(300); // past the ack timeout
    expect(trustOfB(h)).toMatchObject({ state: "open", opened: 2 });
    expect(forwardsIn(h.client("A", "p2", prompt(5, 41)))).toEqual([]);
  });

  it("a half-open probe refused for fit frees the probe and costs nothing: the next request probes", () => {
    const h = demotedThenOpenPeriodOver();
    const demoted = { state: "half-open", failures: 3, refusals: 0, opened: 1 };
    // The probe asks more tokens than B's ceiling: B refuses it for fit, stating its limits.
    expect(forwardsIn(h.client("A", "p1", prompt(4, 40), 100))).toEqual(["B"]);
    expect(trustOfB(h)).toMatchObject(demoted);
    const fwd = h.mailbox.find((m) => m.to === "B" && m.msg.type === "forward");
    h.drop((m) => m === fwd);
    const attempt = fwd?.msg.type === "forward" ? fwd.msg.attempt : -1;
    const refusal = {
      type: "error" as const,
      reqId: "p1",
      attempt,
      error: "maxTokens (100) exceeds this node's max_tokens ceiling of 64",
      retryable: true,
      limits: { maxTokens: 64 },
    };
    const eff = h.input("A", { type: "peer-message", from: "B", msg: refusal });
    expect(eff.some((e) => e.type === "engine-run")).toBe(true); // fell back: runs here
    // No mark against B (not a failure, not even a load back-off), its breaker still half-open…
    expect(trustOfB(h)).toMatchObject(demoted);
    expect(h.node("A").peers()[0]?.limits).toEqual({ maxTokens: 64 });
    // …and its probe free: the next request that fits probes B, whose answer closes the breaker.
    expect(forwardsIn(h.client("A", "p2", prompt(5, 41), 64))).toEqual(["B"]);
    expect(trustOfB(h)).toMatchObject(demoted);
    // B still runs the stalled r1-r3 (their answers dropped) ahead of it.
    for (let i = 0; i < 10 && h.repliesFor("p2").length === 0; i++) {
      h.deliver();
      h.finishRuns("B");
      h.deliver();
    }
    expect(h.repliesFor("p2")[0]?.record.servedBy).toBe("B");
    expect(trustOfB(h)).toMatchObject({ state: "closed", failures: 3, opened: 1 });
  });

  it("a peer that answered is off probation: more than 3 of ours may wait on it", () => {
    const h = setup();
    h.client("A", "r0", prompt(1, 99));
    h.deliver();
    h.finishRuns("B");
    h.deliver();
    expect(h.repliesFor("r0")[0]?.record.servedBy).toBe("B");
    const sent = [1, 2, 3, 4, 5].map((i) => forwardsIn(stalled(h, `r${i}`, i)));
    expect(sent).toEqual([["B"], ["B"], ["B"], ["B"], ["B"]]);
  });

  it("a forward never acked says nothing against the peer (the network may have lost it)", () => {
    const h = setup();
    for (let i = 1; i <= 4; i++) {
      expect(forwardsIn(h.client("A", `r${i}`, prompt(i, 20 + i)))).toEqual(["B"]);
      h.drop(isType("forward"));
      h.advanceLive(300); // past the ack timeout: falls back here
      h.finishRuns("A");
    }
    expect(h.node("A").stats().ackTimeouts).toBe(4);
    expect(trustOfB(h)).toMatchObject({ state: "closed", failures: 0 });
  });
});
