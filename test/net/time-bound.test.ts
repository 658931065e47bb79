import { afterEach, describe, expect, test, vi } from "vitest";
import { raceTimeout } from "../../src/net/time-bound.js";

const never = new Promise<never>(() => {});

describe("raceTimeout", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  test("the work's value when it settles first, and its timer is cleared", async () => {
    vi.useFakeTimers();
    const late = vi.fn(() => "late");
    await expect(raceTimeout(Promise.resolve("done"), 1000, late)).resolves.toBe("done");
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(2000);
    expect(late).not.toHaveBeenCalled();
  });

  test("the work's rejection when it fails first, and its timer is cleared", async () => {
    vi.useFakeTimers();
    await expect(raceTimeout(Promise.reject(new Error("boom")), 1000, () => "late")).rejects.toThrow("boom");
    expect(vi.getTimerCount()).toBe(0);
  });

  test("onTimeout's value once the time passes first", async () => {
    vi.useFakeTimers();
    const raced = raceTimeout(never, 1000, () => "late" as const);
    await vi.advanceTimersByTimeAsync(999);
    expect(vi.getTimerCount()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    await expect(raced).resolves.toBe("late");
  });

  test("onTimeout's throw is the rejection", async () => {
    vi.useFakeTimers();
    const raced = raceTimeout(never, 50, () => {
      throw new RangeError("timed out");
    });
    const seen = expect(raced).rejects.toThrow(RangeError);
    await vi.advanceTimersByTimeAsync(50);
    await seen;
  });

  test("a work that settles after the timeout does not change the outcome", async () => {
    let finish: (v: string) => void = () => {};
    const work = new Promise<string>((r) => {
      finish = r;
    });
    const raced = raceTimeout(work, 1, () => "late");
    await expect(raced).resolves.toBe("late");
    finish("done");
    await expect(raced).resolves.toBe("late");
  });
});
