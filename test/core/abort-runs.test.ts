/**
 * Aborted engine runs (abort-runs.ts), hand-driven in the daemon's forward settings: a running job
 * whose answer nobody takes any more — its client hung up, a hedge's peer answered first, its
 * origin sent the final cancel — is aborted when the engine can (`abortRuns`), never otherwise;
 * nothing replies to it afterwards, the tree takes exactly what the engine kept (the harness checks
 * invariants), and an abort is neither an engine failure nor held against a peer.
 */
import { describe, expect, it } from "vitest";
import { FORWARD_CANCELLED, PrefixNode } from "../../src/core/node/node.js";
import type { Effect } from "../../src/core/node/types.js";
import {
  answerLost,
  DAEMON_RECOVERY,
  type Harness,
  isType,
  type Mail,
  prompt,
  warmPair,
} from "./node-harness.js";

const FORWARD_MS = 5_000;
const ACK_MS = 250;

/** A, B as the daemon runs them; B holds topic 1, so A forwards it there. */
function setup(abortRuns = true): Harness {
  return warmPair({
    ...DAEMON_RECOVERY,
    forwardAckTimeoutMs: ACK_MS,
    forwardTimeoutMs: FORWARD_MS,
    abortRuns,
  });
}

const gone = (h: Harness, id: string, reqId: string) => h.input(id, { type: "client-gone", reqId });
const aborts = (effects: Effect[]) => effects.filter((e) => e.type === "abort-run");
const runs = (h: Harness, id: string) => h.members.get(id)?.runs.size ?? 0;
const toB = (type: string) => (m: Mail) => m.to === "B" && m.msg.type === type;

describe("aborted runs: work nobody takes the answer of", () => {
  it("client gone while its job runs here: the run is aborted, nothing replies, nothing is cached", () => {
    const h = setup();
    h.client("A", "r1", prompt(8, 1));
    const jobId = [...(h.members.get("A")?.runs.keys() ?? [])][0];
    const tree = h.node("A").treeSize();
    const eff = gone(h, "A", "r1");
    expect(aborts(eff)).toEqual([{ type: "abort-run", jobId }]);
    expect(runs(h, "A")).toBe(1); // the slot stays taken until the engine says the run ended
    expect(h.node("A").queueDepth()).toBe(1);
    expect(h.endAborted("A")).toBe(1);
    expect(h.node("A").queueDepth()).toBe(0);
    expect(h.node("A").treeSize()).toBe(tree);
    h.advanceLive(2 * FORWARD_MS);
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(h.node("A").stats()).toMatchObject({
      clientGoneRunning: 1,
      abortedClientGone: 1,
      engineFailures: 0,
      servedLocal: 0,
    });
  });

  it("a prompt prefilled before the abort stays cached, here and in the engine alike", () => {
    const h = setup();
    h.client("A", "r1", prompt(8, 1));
    const tree = h.node("A").treeSize();
    gone(h, "A", "r1");
    h.endAborted("A", true); // checkInvariants: tree = engine cache after the insert
    expect(h.node("A").treeSize()).toBe(tree + prompt(8, 1).length);
    h.client("A", "r2", prompt(8, 1));
    h.finishRuns("A");
    expect(h.repliesFor("r2")[0]?.record.actualHitTokens).toBe(prompt(8, 1).length);
  });

  it("an engine that cannot abort (abortRuns off) runs to its end, unreplied, its insert standing", () => {
    const h = setup(false);
    h.client("A", "r1", prompt(8, 1));
    const tree = h.node("A").treeSize();
    expect(aborts(gone(h, "A", "r1"))).toEqual([]);
    h.finishRuns("A");
    expect(h.node("A").treeSize()).toBeGreaterThan(tree);
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(h.node("A").stats()).toMatchObject({ clientGoneRunning: 1, abortedClientGone: 0 });
  });

  it("a run that ends before its abort takes hold: unreplied, its insert stands, no abort counted", () => {
    const h = setup();
    h.client("A", "r1", prompt(8, 1));
    const tree = h.node("A").treeSize();
    expect(aborts(gone(h, "A", "r1"))).toHaveLength(1);
    h.finishRuns("A");
    expect(h.endAborted("A")).toBe(0); // nothing left to abort
    expect(h.node("A").treeSize()).toBeGreaterThan(tree);
    h.advanceLive(2 * FORWARD_MS);
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(h.node("A").stats()).toMatchObject({ abortedClientGone: 0, engineFailures: 0 });
  });

  it("a hedge's peer answers first: the local run is aborted, the peer's answer is the one reply", () => {
    const h = setup();
    answerLost(h, "r1", prompt(1, 1)); // B's answer is lost: A gives B up and runs r1 itself
    for (let t = 0; runs(h, "A") === 0; t += 10) {
      if (t > 10_000) throw new Error("no local run within 10 s");
      h.advanceLive(10);
      h.drop(toB("forward"));
    }
    h.advanceLive(ACK_MS); // the hedge asks B again
    expect(h.mailbox.filter(toB("forward"))).toHaveLength(1);
    h.deliver(toB("forward"));
    expect(h.aborts).toHaveLength(0);
    h.deliver(); // B's kept answer: the reply
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.aborts).toMatchObject([{ node: "A" }]);
    expect(h.endAborted("A")).toBe(1);
    h.advanceLive(2 * FORWARD_MS);
    expect(h.repliesFor("r1")).toHaveLength(1);
    expect(h.node("A").stats()).toMatchObject({ hedgedAnswers: 1, abortedHedged: 1, engineFailures: 0 });
  });

  it("a forward running at the peer whose client is gone: the final cancel aborts it there", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    expect(runs(h, "B")).toBe(1);
    gone(h, "A", "r1");
    expect(h.mailbox.filter(toB("cancel"))).toMatchObject([{ msg: { reqId: "r1", final: true } }]);
    h.deliver(toB("cancel"));
    expect(h.aborts).toMatchObject([{ node: "B" }]);
    expect(h.endAborted("B")).toBe(1);
    // B says it dropped the job, as for a queued one; A, settled, drops that quietly.
    const said = h.mailbox.filter((m) => m.msg.type === "error" && m.msg.error === FORWARD_CANCELLED);
    expect(said).toHaveLength(1);
    h.deliver();
    h.advanceLive(2 * FORWARD_MS);
    expect(h.repliesFor("r1")).toHaveLength(0);
    expect(h.node("B").stats()).toMatchObject({ abortedCancelled: 1, engineFailures: 0, servedForPeers: 0 });
    expect(h.node("A").stats()).toMatchObject({ fallbacks: 0, servedLocal: 0 });
    expect(h.node("A").peers()[0]?.trust).toMatchObject({ failures: 0, state: "closed" });
  });

  it("a cancel that is not final (its origin may still take a late answer) leaves a started run be", () => {
    const h = setup();
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    h.deliver(isType("forward-ack"));
    const eff = h.input("B", {
      type: "peer-message",
      from: "A",
      msg: { type: "cancel", reqId: "r1", attempt: 1 },
    });
    expect(aborts(eff)).toEqual([]);
    h.finishRuns("B");
    expect(h.mailbox.filter(isType("result"))).toHaveLength(1);
  });

  it("cancels of a request still waiting are not final; those sent as it settles are", () => {
    const h = setup();
    h.client("A", "x1", prompt(7, 1)); // A busy: r1, back from B, waits in A's queue
    h.client("A", "r1", prompt(1, 1));
    h.deliver(isType("forward"));
    // No ack, no answer: the attempt times out and the request moves on, its cancel not final.
    for (let t = 0; h.node("A").stats().fallbacks === 0; t += 10) {
      if (t > 30_000) throw new Error("no fallback within 30 s");
      h.advanceLive(10);
    }
    const cancels = h.mailbox.filter(toB("cancel"));
    expect(cancels.length).toBeGreaterThan(0);
    for (const c of cancels) expect(c.msg).not.toHaveProperty("final");
  });
});

describe("aborted runs on an engine-managed cache", () => {
  it("the tree takes the engine's cache as it reports it after the abort, nothing else", () => {
    let now = 0;
    const node = new PrefixNode(
      { id: "A", peers: [], capacityTokens: 10_000, cacheMode: "engine-managed", abortRuns: true },
      { now: () => now, random: () => 0.5 },
      { checkInvariants: true },
    );
    node.start();
    const tokens = prompt(8, 1);
    const run = node.handle({
      type: "client-request",
      reqId: "r1",
      request: { id: "r1", tokens, maxTokens: 1 },
    });
    const jobId = run.find((e) => e.type === "engine-run")?.jobId as string;
    now = 10;
    expect(node.handle({ type: "client-gone", reqId: "r1" })).toContainEqual({ type: "abort-run", jobId });
    // The engine kept the prompt's first 40 tokens (what it got through): the tree says just that.
    const eff = node.handle({ type: "engine-aborted", jobId, sequences: [tokens.subarray(0, 40)] });
    expect(eff.filter((e) => e.type === "reply")).toEqual([]);
    expect(node.treeSize()).toBe(40);
    expect(node.queueDepth()).toBe(0);
    expect(node.stats()).toMatchObject({ abortedClientGone: 1, engineFailures: 0 });
  });

  it("an abort the node never asked for is a bug (an invariant), not a quiet failure", () => {
    const node = new PrefixNode(
      { id: "A", peers: [], capacityTokens: 10_000, abortRuns: true },
      { now: () => 0, random: () => 0.5 },
    );
    node.start();
    const run = node.handle({
      type: "client-request",
      reqId: "r1",
      request: { id: "r1", tokens: prompt(8, 1), maxTokens: 1 },
    });
    const jobId = run.find((e) => e.type === "engine-run")?.jobId as string;
    expect(() => node.handle({ type: "engine-aborted", jobId })).toThrow(/never asked/);
  });
});
