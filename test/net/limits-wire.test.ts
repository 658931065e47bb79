/** A refusal for fit on the daemon's wire: it carries the refusing node's limits; older peers' carry none. */
import { describe, expect, it } from "vitest";
import { streamLine } from "../../src/net/answer-wire.js";
import { messageFromWire } from "../../src/net/lone-wire.js";
import { streamRecordSchema } from "../../src/net/wire-schemas.js";

const refusal = { type: "error" as const, reqId: "a-1", attempt: 0, error: "too long", retryable: true };

describe("limits on a refusal", () => {
  it("ride an error on the answer stream and on its own request", () => {
    const limits = { contextTokens: 4096, maxTokens: 64 };
    const line = streamRecordSchema.parse(JSON.parse(streamLine.final({ ...refusal, limits })));
    expect(line.t === "msg" && line.msg.type === "error" && line.msg.limits).toEqual(limits);
    const lone = messageFromWire({ ...refusal, limits: { maxTokens: 64 } });
    expect(lone.ok && lone.msg.type === "error" && lone.msg.limits).toEqual({ maxTokens: 64 });
  });

  it("are optional (older peers) and bounded (peer-controlled numbers)", () => {
    const lone = messageFromWire(refusal);
    expect(lone.ok && lone.msg.type === "error" && lone.msg.limits).toBeUndefined();
    for (const bad of [{ maxTokens: 0 }, { maxTokens: 1.5 }, { contextTokens: 1e12 }, { maxTokens: "64" }])
      expect(messageFromWire({ ...refusal, limits: bad }).ok).toBe(false);
  });
});
