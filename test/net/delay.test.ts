import { describe, expect, it, vi } from "vitest";
import { createDelayInjector } from "../../src/net/delay.js";

describe("delay injection", () => {
  it("is a no-op without a timer when delay and jitter are 0", async () => {
    const sleep = vi.fn(async () => {});
    const d = createDelayInjector({ delayMs: 0, jitterMs: 0, sleep });
    expect(d.enabled).toBe(false);
    await d.wait();
    await d.wait();
    expect(sleep).not.toHaveBeenCalled();
  });

  it("waits the fixed delay plus uniform jitter drawn from the injected random source", async () => {
    const draws = [0, 0.5, 0.999];
    const sleep = vi.fn(async (_ms: number) => {});
    const d = createDelayInjector({ delayMs: 2, jitterMs: 4, random: () => draws.shift() ?? 0, sleep });
    expect(d.enabled).toBe(true);
    await d.wait();
    await d.wait();
    await d.wait();
    expect(sleep.mock.calls.map((c) => c[0])).toEqual([2, 4, 2 + 0.999 * 4]);
  });

  it("really delays with the default timer, never less than asked by the monotonic clock", async () => {
    const d = createDelayInjector({ delayMs: 20 });
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      await d.wait();
      expect(performance.now() - t0).toBeGreaterThanOrEqual(20);
    }
  });

  it("works with fake timers", async () => {
    vi.useFakeTimers();
    try {
      const d = createDelayInjector({ delayMs: 100, jitterMs: 0 });
      let done = false;
      const p = d.wait().then(() => {
        done = true;
      });
      await vi.advanceTimersByTimeAsync(99);
      expect(done).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await p;
      expect(done).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });

  it("rejects negative, non-finite and huge values", () => {
    expect(() => createDelayInjector({ delayMs: -1 })).toThrow(/delayMs/);
    expect(() => createDelayInjector({ delayMs: 1, jitterMs: Number.NaN })).toThrow(/jitterMs/);
    expect(() => createDelayInjector({ delayMs: 1e9 })).toThrow(/0\.\.60000/);
  });
});
