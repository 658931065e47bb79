import { describe, expect, it } from "vitest";
import { EngineAbortedError, EngineUnavailableError } from "../../src/engines/errors.js";
import { appendOutput, streamFailure } from "../../src/engines/stream-output.js";

describe("reading a server's completion stream", () => {
  it("adds text up to the bound and fails the run past it", () => {
    const big = "x".repeat(4 << 20);
    expect(appendOutput("ab", "c")).toBe("abc");
    expect(appendOutput(big.slice(1), "y")).toHaveLength(4 << 20);
    expect(() => appendOutput(big, "y")).toThrow(EngineUnavailableError);
  });

  it("ends a failed read as an abort when the caller aborted, else as the server's failure", () => {
    const ac = new AbortController();
    ac.abort();
    expect(streamFailure(new Error("socket hang up"), ac.signal, 1_000)).toBeInstanceOf(EngineAbortedError);
    const own = new EngineUnavailableError("unexpected stream event shape");
    expect(streamFailure(own, undefined, 1_000)).toBe(own);
    const other = streamFailure(new Error("socket hang up"), undefined, 1_000);
    expect(other).toBeInstanceOf(EngineUnavailableError);
    expect(other.message).toBe("stream from server failed: socket hang up");
    const silent = Object.assign(new Error("Body Timeout Error"), { code: "UND_ERR_BODY_TIMEOUT" });
    expect(streamFailure(silent, undefined, 1_000).message).toBe(
      "stream from server failed: Body Timeout Error (the server stopped sending mid-stream for 1000 ms)",
    );
  });
});
