/**
 * One rule for a peer's kept trust, whichever path shows it back in a newer epoch (trust.ts
 * `restarted`): the full mesh's snapshot of a static peer, the first snapshot of a peer removed and
 * added back at run time (DNS), and under gossip "scuttlebutt" a restart SWIM never saw. A restart
 * keeps the distrust a peer earned and ends its proof: the new process is on probation, sent at most
 * `trustMaxUnanswered` forwards it has not answered. (A SWIM death refuted or outlived by a restart:
 * node-trust-refuted.test.ts.)
 */
import { describe, expect, it } from "vitest";
import { daemonGossip, forwardsIn, Harness, isType, prompt, STALLER_TRUST } from "./node-harness.js";

const TOPICS = [1, 2, 3, 4, 5];

function fullMesh(): Harness {
  const h = new Harness(["A", "B"], STALLER_TRUST);
  warmB(h);
  h.gossip(3);
  return h;
}

/** B serves topics 1-5, so A forwards their prompts to B once gossip spreads B's cache. */
function warmB(h: Harness, tag = ""): void {
  for (const t of TOPICS) h.warm("B", `warm${tag}${t}`, prompt(t, 0));
}

/** B crashes and restarts, serves topics 1-5 again, and gossip spreads it. */
function restartB(h: Harness): void {
  h.crash("B");
  h.restart("B");
  warmB(h, "again");
  h.gossip(3);
}

/** B answers one forward of A's: proven, it is off probation. */
function proveB(h: Harness): void {
  expect(forwardsIn(h.client("A", "proof", prompt(1, 99)))).toEqual(["B"]);
  for (let i = 0; i < 20 && h.repliesFor("proof").length === 0; i++) {
    h.deliver();
    h.finishRuns("B");
    h.advance(1);
  }
  expect(h.repliesFor("proof")[0]?.record.servedBy).toBe("B");
}

/** Five requests A forwards while B acks and answers none: whom each first went to. */
function stallFive(h: Harness): string[][] {
  return TOPICS.map((t) => {
    const eff = h.client("A", `s${t}`, prompt(t, 50 + t));
    h.deliver((m) => m.msg.type === "forward" || m.msg.type === "forward-ack");
    h.drop((m) => m.from === "B" && (m.msg.type === "result" || m.msg.type === "error"));
    return forwardsIn(eff);
  });
}

const ALL_TO_B = [["B"], ["B"], ["B"], ["B"], ["B"]];
const PROBATION = [["B"], ["B"], ["B"], [], []];

describe("a peer's trust across a restart, by every path that sees one", () => {
  it("control: a proven peer that did not restart is not held to probation", () => {
    const h = fullMesh();
    proveB(h);
    expect(stallFive(h)).toEqual(ALL_TO_B);
  });

  it("full mesh, a static peer: its snapshot in a newer epoch puts it back on probation", () => {
    const h = fullMesh();
    proveB(h);
    restartB(h);
    expect(stallFive(h)).toEqual(PROBATION);
  });

  it("an honest restart after failures short of the breaker: the new process is sent forwards", () => {
    // More failures open the breaker than probation allows unanswered: if the old process's failed
    // forwards stayed in the new one's probation count, it would never be sent one again.
    const h = new Harness(["A", "B"], { ...STALLER_TRUST, trustFailures: 5 });
    warmB(h);
    h.gossip(3);
    proveB(h);
    for (const t of [1, 2, 3]) {
      expect(forwardsIn(h.client("A", `f${t}`, prompt(t, 30 + t)))).toEqual(["B"]);
      h.deliver((m) => m.msg.type === "forward" || m.msg.type === "forward-ack");
      h.drop((m) => m.from === "B" && (m.msg.type === "result" || m.msg.type === "error"));
    }
    for (let ms = 0; (h.node("A").peers()[0]?.trust?.failures ?? 0) < 3; ms += 10) {
      if (ms > 30_000) throw new Error("B's stalled forwards never failed");
      h.advanceLive(10);
    }
    expect(h.node("A").peers()[0]?.trust).toMatchObject({ state: "closed", failures: 3 });
    restartB(h);
    expect(stallFive(h)).toEqual(PROBATION);
  });

  it("full mesh, removed and added back (DNS): a restart while out is seen, the same epoch is not", () => {
    const h = fullMesh();
    proveB(h);
    h.apply("A", h.node("A").removePeer("B"));
    h.gossip(2);
    expect(h.node("A").addPeer("B")).toBe(true);
    h.gossip(3);
    expect(stallFive(h)).toEqual(ALL_TO_B); // out and back, the same process: still proven

    const r = fullMesh();
    proveB(r);
    r.apply("A", r.node("A").removePeer("B"));
    r.crash("B");
    r.restart("B");
    warmB(r, "again");
    r.gossip(2);
    expect(r.node("A").addPeer("B")).toBe(true);
    r.gossip(3);
    expect(stallFive(r)).toEqual(PROBATION);
  });

  it("gossip scuttlebutt, a restart SWIM never saw (back within its suspicion time)", () => {
    const h = daemonGossip(["A", "B"], 250, { trustMaxUnanswered: 3, forwardTimeoutMs: 5_000 });
    for (const t of [2, 3, 4, 5]) h.warm("B", `warm${t}`, prompt(t, 0));
    h.advanceLive(3_000);
    proveB(h);
    h.crash("B");
    h.advance(10);
    h.restart("B");
    h.deliverMesh();
    expect(h.node("A").livenessOf("B")).toBe("live"); // SWIM saw nothing
    warmB(h, "again");
    h.advanceLive(3_000);
    h.deliver(isType("snapshot"));
    expect(stallFive(h)).toEqual(PROBATION);
  });
});
