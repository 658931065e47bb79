/**
 * The receiver's transport-facing rules, stated in the core: deferred forward acks (`ackDeferMs`) and
 * refusing a tokens-only forward while this node's engine needs the prompt text (`needsPromptText`).
 */
import { describe, expect, it } from "vitest";
import type { Effect, PeerMessage } from "../../src/core/node/types.js";
import { PROMPT_TEXT_NEEDED } from "../../src/core/node/types.js";
import { PROMPT_TEXT_NEEDED as WIRE_PROMPT_TEXT_NEEDED } from "../../src/net/transport-wire.js";
import { Harness, isType, type Mail, prompt } from "./node-harness.js";

const DEFER_MS = 10;

function forwardMsg(reqId: string, tokens: Uint32Array, text?: string): PeerMessage {
  const request = { id: reqId, tokens, maxTokens: 1, ...(text === undefined ? {} : { prompt: text }) };
  return { type: "forward", reqId, attempt: 1, hops: 1, request };
}

const sentTypes = (effects: Effect[]): string[] =>
  effects.flatMap((e) => (e.type === "send" ? [e.msg.type] : []));
const timerEffects = (effects: Effect[]) =>
  effects.filter((e) => (e.type === "set-timer" || e.type === "cancel-timer") && e.timer.kind === "acks");

describe("deferred forward acks (ackDeferMs)", () => {
  it("an ack waits ackDeferMs, then leaves while the job still waits", () => {
    const h = new Harness(["A", "B"], { ackDeferMs: DEFER_MS });
    h.client("B", "busy", prompt(9, 1)); // B's slot is taken: the forward queues
    const eff = h.input("B", { type: "peer-message", from: "A", msg: forwardMsg("f1", prompt(1, 1)) });
    expect(sentTypes(eff)).toEqual([]);
    expect(timerEffects(eff)).toEqual([{ type: "set-timer", timer: { kind: "acks" }, delayMs: DEFER_MS }]);
    h.advance(DEFER_MS - 1);
    expect(h.mailbox.filter(isType("forward-ack"))).toHaveLength(0);
    h.advance(1);
    const acks = h.mailbox.filter(isType("forward-ack"));
    expect(acks).toMatchObject([{ from: "B", to: "A", msg: { reqId: "f1", attempt: 1 } }]);
    expect(h.members.get("B")?.timers.has("acks")).toBe(false); // nothing waits: not armed again
  });

  it("an answer that leaves first drops its ack, and the timer goes with the last one waiting", () => {
    const h = new Harness(["A", "B"], { ackDeferMs: DEFER_MS });
    const eff = h.input("B", { type: "peer-message", from: "A", msg: forwardMsg("f1", prompt(1, 1)) });
    expect(eff.some((e) => e.type === "engine-run")).toBe(true); // started at once: not enough
    h.finishRuns("B");
    expect(h.mailbox.filter(isType("result"))).toHaveLength(1);
    expect(h.members.get("B")?.timers.has("acks")).toBe(false);
    h.advance(5 * DEFER_MS);
    expect(h.mailbox.filter(isType("forward-ack"))).toHaveLength(0);
  });

  it("a cancelled queued forward gets its error and no ack", () => {
    const h = new Harness(["A", "B"], { ackDeferMs: DEFER_MS });
    h.client("B", "busy", prompt(9, 1));
    h.input("B", { type: "peer-message", from: "A", msg: forwardMsg("f1", prompt(1, 1)) });
    const eff = h.input("B", {
      type: "peer-message",
      from: "A",
      msg: { type: "cancel", reqId: "f1", attempt: 1 },
    });
    expect(sentTypes(eff)).toEqual(["error"]);
    expect(timerEffects(eff)).toEqual([{ type: "cancel-timer", timer: { kind: "acks" } }]);
    h.advance(5 * DEFER_MS);
    expect(h.mailbox.filter(isType("forward-ack"))).toHaveLength(0);
  });

  it("one timer serves every waiting ack, each sent when it falls due", () => {
    const h = new Harness(["A", "B"], { ackDeferMs: DEFER_MS });
    h.client("B", "busy", prompt(9, 1));
    const first = h.input("B", { type: "peer-message", from: "A", msg: forwardMsg("f1", prompt(1, 1)) });
    h.advance(4);
    const second = h.input("B", { type: "peer-message", from: "A", msg: forwardMsg("f2", prompt(2, 1)) });
    expect(timerEffects(first)).toHaveLength(1);
    expect(timerEffects(second)).toHaveLength(0); // already armed
    const ackTimes: Record<string, number> = {};
    for (let t = 0; t < 3 * DEFER_MS; t++) {
      h.advance(1);
      for (const m of h.mailbox.filter(isType("forward-ack")) as Mail[]) {
        const reqId = (m.msg as { reqId: string }).reqId;
        ackTimes[reqId] ??= h.now;
      }
    }
    expect(ackTimes).toEqual({ f1: DEFER_MS, f2: 4 + DEFER_MS });
  });

  it("off by default: the ack leaves at once, with no timer", () => {
    const h = new Harness(["A", "B"]);
    const eff = h.input("B", { type: "peer-message", from: "A", msg: forwardMsg("f1", prompt(1, 1)) });
    expect(sentTypes(eff)).toEqual(["forward-ack"]);
    expect(timerEffects(eff)).toEqual([]);
  });
});

describe("tokens-only forwards while the engine needs the prompt text (needsPromptText)", () => {
  it("are refused at once, retryably, and the re-send with the text is no duplicate", () => {
    const h = new Harness(["A", "B"], { needsPromptText: true });
    const tokens = prompt(1, 1);
    const refused = h.input("B", { type: "peer-message", from: "A", msg: forwardMsg("f1", tokens) });
    expect(refused).toEqual([
      {
        type: "send",
        to: "A",
        msg: { type: "error", reqId: "f1", attempt: 1, error: PROMPT_TEXT_NEEDED, retryable: true },
      },
    ]);
    const again = h.input("B", {
      type: "peer-message",
      from: "A",
      msg: forwardMsg("f1", tokens, "the text"),
    });
    expect(sentTypes(again)).toEqual(["forward-ack"]);
    expect(again.some((e) => e.type === "engine-run")).toBe(true);
    expect(h.node("B").stats().duplicateForwards).toBe(0);
  });

  it("are served as before when the engine runs from tokens (the default)", () => {
    const h = new Harness(["A", "B"]);
    const eff = h.input("B", { type: "peer-message", from: "A", msg: forwardMsg("f1", prompt(1, 1)) });
    expect(sentTypes(eff)).toEqual(["forward-ack"]);
  });

  it("the wire's refusal text is the core's", () => {
    expect(WIRE_PROMPT_TEXT_NEEDED).toBe(PROMPT_TEXT_NEEDED);
  });
});
