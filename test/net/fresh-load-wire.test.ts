/** freshPeerLoad on the daemon's wire: an answer carries the server's queue depth, older peers' without it. */
import { describe, expect, it } from "vitest";
import { replyToWire, streamLine } from "../../src/net/answer-wire.js";
import { messageFromWire } from "../../src/net/lone-wire.js";
import { streamRecordSchema } from "../../src/net/wire-schemas.js";

const result = {
  type: "result" as const,
  reqId: "a-1",
  attempt: 0,
  result: {
    text: "A",
    completionTokens: 1,
    promptTokens: 10,
    cachedTokens: 5,
    prefillMs: 3,
    decodeMs: 1,
    finishReason: "stop" as const,
    cachedSequences: [Uint32Array.of(1, 2)],
  },
  timing: { servedBy: "b", queueMs: 0, prefillMs: 3, decodeMs: 1 },
};

describe("queue depth on answers", () => {
  it("rides a result on its own request and on the answer stream", () => {
    const wire = replyToWire({ ...result, queueDepth: 4 });
    expect(wire).toMatchObject({ queueDepth: 4 });
    expect("cachedSequences" in (wire.type === "result" ? wire.result : {})).toBe(false);
    const lone = messageFromWire(JSON.parse(JSON.stringify(wire)));
    expect(lone.ok && lone.msg.type === "result" && lone.msg.queueDepth).toBe(4);
    const line = streamRecordSchema.parse(JSON.parse(streamLine.final({ ...result, queueDepth: 2 })));
    expect(line.t === "msg" && line.msg.type === "result" && line.msg.queueDepth).toBe(2);
  });

  it("is optional (older peers) and bounded (a peer-controlled number)", () => {
    const wire = JSON.parse(JSON.stringify(replyToWire(result)));
    expect("queueDepth" in wire).toBe(false);
    expect(messageFromWire(wire).ok).toBe(true);
    expect(messageFromWire({ ...wire, queueDepth: -1 }).ok).toBe(false);
    expect(messageFromWire({ ...wire, queueDepth: 1.5 }).ok).toBe(false);
    expect(messageFromWire({ ...wire, queueDepth: 1e12 }).ok).toBe(false);
  });
});
