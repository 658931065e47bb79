/**
 * A peer's forward still being tokenized again here (mixed models) when its origin cancels it (a
 * plain cancel, or the final one): its step ends at once, its engine call aborted, and its stream is
 * answered as cancelled (a protocol refusal, no fault) without the node ever running it, and not
 * counted as a tokenize refusal. An engine that ignores the abort still holds its
 * `--max-peer-tokenizing` place until its call ends. The engine is a TEST DOUBLE: the simulator's,
 * whose tokenize of a text starting "hang" ends only by its signal's abort, and of "deaf" only when
 * the test releases it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatMessage, Tokens } from "../../src/core/engine.js";
import { FORWARD_CANCELLED } from "../../src/core/node/serving.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { fetchForeignForward, finalMsg, postCancel, postForeignForward } from "./forward-post.js";
import { mixedPair, openForwards } from "./helpers.js";
import { peerTokenizing, refusedFor } from "./retokenize-counts.js";
import { abortOnly, RunRecordingDouble } from "./run-recording-double.js";

/** Test double: "hang" tokenizes end only by their signal's abort, "deaf" ones only when released. */
class CancellableDouble extends RunRecordingDouble {
  aborted = 0;
  readonly held: (() => void)[] = [];
  override async tokenize(text: string, signal?: AbortSignal): Promise<Tokens> {
    // Only the test's own texts: the node's calibration tokenizes under timeouts of their own.
    if (!text.startsWith("deaf") && !text.startsWith("hang")) return super.tokenize(text);
    signal?.addEventListener("abort", () => this.aborted++);
    if (text.startsWith("deaf")) await new Promise<void>((go) => this.held.push(go));
    else await abortOnly(signal);
    return super.tokenize(text);
  }
  /** A chat whose first message starts "hang" renders only by its signal's abort. */
  override async applyChatTemplate(messages: ChatMessage[], signal?: AbortSignal): Promise<string> {
    if (!messages[0]?.content.startsWith("hang")) return super.applyChatTemplate(messages);
    signal?.addEventListener("abort", () => this.aborted++);
    return abortOnly(signal);
  }
  release(): void {
    for (const go of this.held.splice(0)) go();
  }
}

async function until(ok: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!ok() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
}

describe("a forward cancelled while it is tokenized again", () => {
  let a: NodeHandle;
  let b: NodeHandle;
  const engine = new CancellableDouble();
  beforeAll(async () => {
    // The bound far past the test: only the cancel can end the step.
    [a, b] = await mixedPair(engine);
  });
  afterAll(async () => {
    engine.release();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it.each([
    ["a cancel", "cancel-plain", false, { prompt: "hang here" }],
    ["the final cancel", "cancel-final", true, { prompt: "hang there" }],
    [
      "a cancel during a chat's template",
      "cancel-chat",
      false,
      { messages: [{ role: "user" as const, content: "hang" }] },
    ],
  ])(
    "%s ends its step at once, never reaching the node",
    async (_what, reqId, final, text) => {
      const aborted = engine.aborted;
      const refused = await refusedFor(a, "tokenize");
      const cancelled = await refusedFor(a, "cancelled");
      const res = fetchForeignForward(a, reqId, text, AbortSignal.timeout(20_000));
      await until(() => peerTokenizing(a) === 1);
      expect(peerTokenizing(a)).toBe(1);
      await postCancel(a, reqId, final);
      await until(() => engine.aborted > aborted && peerTokenizing(a) === 0);
      expect(engine.aborted).toBe(aborted + 1);
      expect(peerTokenizing(a)).toBe(0);
      const msg = await finalMsg(await res);
      expect([msg.type, msg.error, msg.fault]).toEqual(["error", FORWARD_CANCELLED, undefined]);
      expect(openForwards(a)).toBe(0);
      expect(engine.ran).not.toContain(reqId);
      expect(await refusedFor(a, "tokenize")).toBe(refused);
      expect(await refusedFor(a, "cancelled")).toBe(cancelled + 1);
    },
    30_000,
  );

  it("an engine that ignores the abort holds its place until its call ends", async () => {
    const res = fetchForeignForward(a, "cancel-deaf", { prompt: "deaf here" }, AbortSignal.timeout(20_000));
    await until(() => engine.held.length === 1);
    await postCancel(a, "cancel-deaf", false);
    const msg = await finalMsg(await res);
    expect([msg.type, msg.error]).toEqual(["error", FORWARD_CANCELLED]);
    expect(peerTokenizing(a)).toBe(1);
    engine.release();
    await until(() => peerTokenizing(a) === 0);
    expect(peerTokenizing(a)).toBe(0);
    // A forward nobody cancels runs under its own id: what the checks of `ran` look for.
    const served = await postForeignForward(a, "uncancelled", { prompt: "a question" }, 20_000);
    expect(served.type).toBe("result");
    expect(engine.ran).toContain("uncancelled");
    // Its tokens came after all, but nobody waits for them: the node never ran it (the forward
    // above has run since).
    expect(engine.ran).not.toContain("cancel-deaf");
  }, 30_000);
});
