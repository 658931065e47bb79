/**
 * A failed run's fault on the daemon's wire: it rides a forward's error on the answer stream and on
 * its own request; older peers' errors carry none, and a value this node does not know reads as none.
 */
import { describe, expect, it } from "vitest";
import { streamLine } from "../../src/net/answer-wire.js";
import { messageFromWire } from "../../src/net/lone-wire.js";
import { streamRecordSchema } from "../../src/net/wire-schemas.js";

const failed = {
  type: "error" as const,
  reqId: "a-1",
  attempt: 0,
  error: "engine: HTTP 400",
  retryable: false,
};

describe("a failed run's fault", () => {
  it("rides an error on the answer stream and on its own request", () => {
    for (const fault of ["input", "load", "engine"] as const) {
      const line = streamRecordSchema.parse(JSON.parse(streamLine.final({ ...failed, fault })));
      expect(line.t === "msg" && line.msg.type === "error" && line.msg.fault).toBe(fault);
      const lone = messageFromWire({ ...failed, fault });
      expect(lone.ok && lone.msg.type === "error" && lone.msg.fault).toBe(fault);
    }
  });

  it("is optional (older peers), and an unknown one reads as none without losing the error", () => {
    const old = messageFromWire(failed);
    expect(old.ok && old.msg.type === "error" && old.msg.fault).toBeUndefined();
    for (const odd of ["later", 7, { x: 1 }, "x".repeat(10_000)]) {
      const lone = messageFromWire({ ...failed, fault: odd });
      expect(lone.ok && lone.msg.type === "error" && lone.msg.error).toBe("engine: HTTP 400");
      expect(lone.ok && lone.msg.type === "error" && lone.msg.fault).toBeUndefined();
    }
  });
});
