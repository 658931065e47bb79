import { describe, expect, it } from "vitest";
import { type RequestSample, summarize } from "../../src/bench/replay.js";

const sample = (over: Partial<RequestSample>): RequestSample => ({
  id: "r",
  group: "g",
  entry: 0,
  ok: true,
  status: 200,
  latencyMs: 10,
  promptTokens: 100,
  cachedTokens: 50,
  servedBy: "A",
  hops: 0,
  ...over,
});

describe("bench summary: where the time went", () => {
  it("averages the nodes' breakdown over the answered requests that reported one, and sums failed attempts", () => {
    const s = summarize(
      [
        sample({ timing: { queue: 1, prefill: 10, decode: 2, network: 0 }, fallbacks: 0 }),
        sample({ timing: { queue: 3, prefill: 20, decode: 4, network: 6 }, fallbacks: 2, hops: 1 }),
        sample({ timing: undefined }), // an older node: no breakdown, left out of the mean
        sample({ ok: false, status: 502, timing: { queue: 99, prefill: 99, decode: 99, network: 99 } }),
      ],
      1,
    );
    expect(s.meanTimingMs).toEqual({ queue: 2, prefill: 15, decode: 3, network: 3 });
    expect(s.fallbacks).toBe(2);
  });

  it("has no breakdown when no request reported one", () => {
    expect(summarize([sample({})], 1).meanTimingMs).toBeUndefined();
  });

  it("counts prompts refused as too long apart from failures", () => {
    const s = summarize(
      [
        sample({}),
        sample({ ok: false, status: 400, error: "400 prompt has 2343 tokens", tooLong: true }),
        sample({ ok: false, status: 502, error: "502 all routes failed" }),
      ],
      1,
    );
    expect(s).toMatchObject({ ok: 1, failed: 1, tooLong: 1, errors: { "502 all routes failed": 1 } });
  });
});
