/**
 * A cancel that reaches this node before its forward (the channel transport hands a resumed peer's
 * cancel over first; HTTP may reorder): the forward, in another model's tokens (mixed models), is
 * answered as cancelled at once, never tokenized here and never holding a `--max-peer-tokenizing`
 * place. The cancel covers its own attempt only, as the core's does. The engine is a TEST DOUBLE: the
 * simulator's, counting its tokenizes and chat templates, where a text starting "hang" ends only by
 * its signal's abort (no bound ends it within the test).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatMessage, Tokens } from "../../src/core/engine.js";
import { FORWARD_CANCELLED } from "../../src/core/node/serving.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { fetchForeignForward, finalMsg, postCancel, postForeignForward } from "./forward-post.js";
import { mixedPair, openForwards } from "./helpers.js";
import { peerTokenizing, refusedFor } from "./retokenize-counts.js";
import { abortOnly, RunRecordingDouble } from "./run-recording-double.js";

/** Test double: counts the test's own engine steps; "hang" ones end only by their signal's abort. */
class CountingDouble extends RunRecordingDouble {
  /** Texts this engine was asked to tokenize, and chats to render (the test's own only). */
  readonly tokenized: string[] = [];
  readonly rendered: string[] = [];
  override async tokenize(text: string, signal?: AbortSignal): Promise<Tokens> {
    // Only the test's own texts: the node's calibration tokenizes too.
    if (!text.startsWith("hang") && !text.startsWith("early")) return super.tokenize(text);
    this.tokenized.push(text);
    if (text.startsWith("hang")) await abortOnly(signal);
    return super.tokenize(text);
  }
  override async applyChatTemplate(messages: ChatMessage[], signal?: AbortSignal): Promise<string> {
    const first = messages[0]?.content ?? "";
    if (!first.startsWith("hang")) return super.applyChatTemplate(messages);
    this.rendered.push(first);
    return abortOnly(signal);
  }
}

describe("a forward whose cancel came first", () => {
  let a: NodeHandle;
  let b: NodeHandle;
  const engine = new CountingDouble();
  beforeAll(async () => {
    // The bound far past the test: a forward tokenized here would hold its stream until the fetch's end.
    [a, b] = await mixedPair(engine);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it.each([
    ["a cancel", "early-plain", false, { prompt: "hang here" }],
    ["the final cancel", "early-final", true, { prompt: "hang there" }],
    ["a cancel of a chat", "early-chat", false, { messages: [{ role: "user" as const, content: "hang" }] }],
  ])(
    "after %s it is answered at once, never tokenized",
    async (_what, reqId, final, text) => {
      const cancelled = await refusedFor(a, "cancelled");
      const [tokenized, rendered] = [engine.tokenized.length, engine.rendered.length];
      await postCancel(a, reqId, final);
      const msg = await finalMsg(await fetchForeignForward(a, reqId, text, AbortSignal.timeout(10_000)));
      expect([msg.type, msg.error, msg.fault]).toEqual(["error", FORWARD_CANCELLED, undefined]);
      expect(engine.tokenized.length).toBe(tokenized);
      expect(engine.rendered.length).toBe(rendered);
      expect(peerTokenizing(a)).toBe(0);
      expect(openForwards(a)).toBe(0);
      expect(engine.ran).not.toContain(reqId);
      expect(await refusedFor(a, "cancelled")).toBe(cancelled + 1);
    },
    30_000,
  );

  it("a cancel of one attempt leaves the next one served", async () => {
    await postCancel(a, "early-next", false, 0);
    const res = fetchForeignForward(
      a,
      "early-next",
      { prompt: "early next" },
      AbortSignal.timeout(20_000),
      1,
    );
    const msg = await finalMsg(await res);
    expect(msg.type).toBe("result");
    expect(engine.tokenized).toContain("early next");
    expect(engine.ran).toContain("early-next");
    // Its attempt 0 coming late now is still answered as cancelled, untokenized.
    const late = await postForeignForward(a, "early-next", { prompt: "early late" }, 10_000);
    expect([late.type, late.error]).toEqual(["error", FORWARD_CANCELLED]);
    expect(engine.tokenized).not.toContain("early late");
  }, 30_000);
});
