/** The KV-event mirror's transition log: one line per transition, at most so many per window. */
import { afterEach, describe, expect, test, vi } from "vitest";
import { KvTransitionLog, type MirrorStanding } from "../../../src/engines/kv-events/transition-log.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("the KV-event mirror's transition log", () => {
  test("exact again is said only after a degraded line", () => {
    const lines: string[] = [];
    let standing: MirrorStanding = { exact: true, degraded: undefined };
    const log = new KvTransitionLog(
      (m) => lines.push(m),
      () => standing,
    );
    log.changed();
    expect(lines).toEqual([]);
    // Forgetting nothing while degraded already is no news.
    log.transition({ kind: "forgot", reason: "r", blocks: 0, degraded: false });
    expect(lines).toEqual([]);
    standing = { exact: false, degraded: "r" };
    log.transition({ kind: "degraded", reason: "r" });
    log.changed();
    standing = { exact: true, degraded: undefined };
    log.changed();
    log.changed();
    expect(lines).toEqual([
      expect.stringMatching(/^KV-event mirror degraded/),
      "KV-event mirror exact again",
    ]);
  });

  test("a new publisher is said once, then exact again once its history is read", () => {
    const lines: { msg: string; fields: Record<string, unknown> }[] = [];
    let standing: MirrorStanding = { exact: true, degraded: undefined, restarts: 0 };
    const log = new KvTransitionLog(
      (msg, fields) => lines.push({ msg, fields }),
      () => standing,
    );
    standing = { exact: false, degraded: undefined, restarts: 1 };
    log.changed();
    log.changed();
    standing = { exact: true, degraded: undefined, restarts: 1 };
    log.changed();
    expect(lines).toEqual([
      { msg: expect.stringMatching(/^KV-event publisher restarted/), fields: { restarts: 1 } },
      { msg: "KV-event mirror exact again", fields: {} },
    ]);
  });

  test("a flapping mirror: lines bounded per window, then one line with the count and the standing", () => {
    vi.useFakeTimers();
    const lines: { msg: string; fields: Record<string, unknown> }[] = [];
    let standing: MirrorStanding = { exact: true, degraded: undefined };
    const log = new KvTransitionLog(
      (msg, fields) => lines.push({ msg, fields }),
      () => standing,
      { maxLines: 3, windowMs: 10_000, now: () => Date.now() },
    );
    for (let i = 0; i < 10; i++) {
      standing = { exact: false, degraded: `gap ${i}` };
      log.transition({ kind: "degraded", reason: `gap ${i}` });
      standing = { exact: true, degraded: undefined };
      log.changed();
    }
    expect(lines).toHaveLength(3);
    standing = { exact: false, degraded: "gap 10" };
    log.transition({ kind: "degraded", reason: "gap 10" });
    expect(lines).toHaveLength(3);
    vi.advanceTimersByTime(10_000);
    expect(lines).toHaveLength(4);
    // 20 transitions, 3 logged, plus the last degraded: 18 left out; the last line says where it stands.
    expect(lines[3]).toEqual({
      msg: "KV-event mirror changed more often than logged",
      fields: { suppressed: 18, exact: false, degraded: "gap 10" },
    });
    // Still degraded: its exact line is still due, in the new window.
    standing = { exact: true, degraded: undefined };
    log.changed();
    expect(lines[4]?.msg).toBe("KV-event mirror exact again");
    log.close();
  });
});
