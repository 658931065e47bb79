/**
 * MemberVerification (mesh-verify.ts) with fakes: a verification whose address never answers is given
 * up after a bounded number of tries (started over, a bounded number of times, at a new address) and
 * answered no (so SWIM's refusal backoff asks again later, and a check SWIM dropped meanwhile frees
 * its slot); a check past MAX_VERIFYING is answered no, never dropped.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { NodeInput } from "../../src/core/node/types.js";
import { TransportError } from "../../src/net/transport-error.js";
import { MAX_ADDRESS_RESETS, MAX_TRIES, MAX_VERIFYING } from "../../src/server/runtime/mesh-verify.js";
import { verificationOver } from "./mesh-fakes.js";

const unreachable = () =>
  Promise.reject(new TransportError("connection", "connect ECONNREFUSED 127.0.0.1:1"));

/** Fake time advanced a second at a time until `cond` holds (or a simulated hour passed). */
async function advanceUntil(what: string, cond: () => boolean): Promise<void> {
  for (let s = 0; !cond(); s++) {
    if (s > 3_600) throw new Error(`timed out: ${what}`);
    await vi.advanceTimersByTimeAsync(1_000);
  }
}

afterEach(() => void vi.useRealTimers());

describe("a verification", () => {
  it("of an address that never answers is given up and answered no, freeing its slot", async () => {
    vi.useFakeTimers();
    const f = verificationOver(unreachable);
    f.v.verify("B");
    expect(f.v.has("B")).toBe(true);
    await advanceUntil("B answered", () => f.fed.length > 0);
    expect(f.fed).toHaveLength(1);
    const answer = f.fed[0] as Extract<NodeInput, { type: "member-verified" }>;
    expect(answer).toMatchObject({ type: "member-verified", id: "B", ok: false });
    expect(answer.reason).toMatch(/^unreachable/);
    expect(f.v.has("B")).toBe(false);
    // Retried meanwhile (an address that did not answer at first may yet), and no more after.
    const tries = f.asked();
    expect(tries).toBeGreaterThan(3);
    await vi.advanceTimersByTimeAsync(600_000);
    expect(f.asked()).toBe(tries);
    expect(f.fed).toHaveLength(1);
    f.v.stop();
  });

  it("of a member that moved starts its tries over at the new address (a bounded number of times)", async () => {
    vi.useFakeTimers();
    const f = verificationOver(unreachable);
    f.v.verify("B");
    // All but the last try made to the old address; then B is heard of at a new one.
    await advanceUntil("B tried", () => f.asked() >= MAX_TRIES - 1);
    expect(f.fed).toHaveLength(0);
    const before = f.asked();
    f.v.addressChanged("B");
    await advanceUntil("B answered", () => f.fed.length > 0);
    expect(f.asked() - before).toBe(MAX_TRIES);
    expect((f.fed[0] as { reason?: string }).reason).toMatch(/^unreachable/);
    // An address that keeps changing: tries start over only so often, and it is answered all the same.
    const g = verificationOver(unreachable);
    g.v.verify("C");
    for (let moves = 0; g.fed.length === 0; moves++) {
      if (moves > 100) throw new Error("C never answered");
      await vi.advanceTimersByTimeAsync(5_000);
      g.v.addressChanged("C");
    }
    expect(g.asked()).toBeLessThanOrEqual((MAX_ADDRESS_RESETS + 1) * MAX_TRIES);
    expect(g.fed[0]).toMatchObject({ type: "member-verified", id: "C", ok: false });
    f.v.stop();
    g.v.stop();
  });

  it("past MAX_VERIFYING is answered no and warned of, never dropped silently", async () => {
    const f = verificationOver(() => new Promise(() => {})); // every address hangs
    for (let i = 0; i < MAX_VERIFYING; i++) f.v.verify(`N${i}`);
    expect(f.fed).toHaveLength(0);
    f.v.verify("B");
    await vi.waitFor(() => expect(f.fed).toHaveLength(1), { timeout: 10_000 });
    expect(f.fed[0]).toMatchObject({ type: "member-verified", id: "B", ok: false });
    expect((f.fed[0] as { reason?: string }).reason).toMatch(/^busy/);
    expect(f.warnings.some((w) => w.includes("too many members being verified"))).toBe(true);
    expect(f.v.has("B")).toBe(false);
    f.v.stop();
  });
});
