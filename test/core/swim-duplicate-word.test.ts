/**
 * Two live processes with one id, as a checker sees them once their outbids ran out (swim/self-news.ts):
 * relays keep telling the higher process's record, and the checks of it are answered by whichever
 * process the hello fetch reaches, each with its own word (own-word.ts). A word below the record is
 * read as a forged claim taken down (admissions.ts), so the record is re-checked when told again, but
 * never more than once per `recheckAfterChangeMs` (disowned.ts): a bounded cost, and the member is never
 * put out, only its incarnation moves between the two processes' words.
 */
import { describe, expect, test } from "vitest";
import { resolveSwimConfig } from "../../src/core/node/swim/config.js";
import { harness } from "./swim-harness.js";

const LOW = 100;
const HIGH = 200;
const EVERY = resolveSwimConfig({}).recheckAfterChangeMs;
/** How often a relay tells the higher process's record (far more often than the re-check interval). */
const TOLD_EVERY_MS = 100;
const DURATION_MS = 600_000;

/**
 * `a` holding b at LOW, told b alive at HIGH by relay c every TOLD_EVERY_MS for DURATION_MS; each check
 * answered at once with `word(n)` for the n-th check. Returns the checks' times and what a held of b.
 */
function run(word: (n: number) => number) {
  const h = harness();
  h.admit("b", LOW);
  h.admit("c", 0);
  h.verifies.length = 0;
  const checks: number[] = [];
  const held = new Set<number>();
  const downs: string[] = [];
  for (let t = 1; t <= DURATION_MS; t += TOLD_EVERY_MS) {
    h.at(t);
    for (const e of h.gossip("c", [{ id: "b", status: "alive", incarnation: HIGH }]))
      if (e.type === "member-down") downs.push(e.id);
    while (h.verifies.length > 0) {
      h.verifies.shift();
      checks.push(t);
      for (const e of h.verified("b", true, word(checks.length - 1)))
        if (e.type === "member-down") downs.push(e.id);
    }
    held.add(h.incarnationOf("b") as number);
    expect(h.swim.status("b")).toBe("alive");
  }
  return { h, checks, held, downs };
}

describe("a member's checks answered by two processes with one id", () => {
  test("answered alternately (lower, higher): quiet once the higher word is heard", () => {
    const { checks, held, downs, h } = run((n) => (n % 2 === 0 ? LOW : HIGH));
    // The first check takes HIGH down to LOW's word; the re-check an interval later hears HIGH's own.
    expect(checks).toHaveLength(2);
    expect((checks[1] as number) - (checks[0] as number)).toBeGreaterThanOrEqual(EVERY);
    expect(h.incarnationOf("b")).toBe(HIGH);
    expect([...held].sort((x, y) => x - y)).toEqual([LOW, HIGH]);
    expect(downs).toEqual([]);
  });

  test("answered always by the lower process: re-checked once per interval, without end", () => {
    const { checks, downs, h } = run(() => LOW);
    // Bounded: never two checks within one re-check interval...
    for (let i = 1; i < checks.length; i++)
      expect((checks[i] as number) - (checks[i - 1] as number)).toBeGreaterThanOrEqual(EVERY);
    // ...but it never settles: one per interval (plus one told-gap of slack each) for as long as it runs.
    expect(checks.length).toBeGreaterThan(DURATION_MS / (EVERY + TOLD_EVERY_MS) - 1);
    // Each taken down as a forgery; the checker does not count a duplicate id (only the twins do).
    expect(h.swim.stats.implausibleIncarnations).toBe(checks.length);
    expect(h.swim.stats.duplicateId).toBe(0);
    // Never put out nor held above the word it hears: routing and estimates are untouched.
    expect(h.incarnationOf("b")).toBe(LOW);
    expect(downs).toEqual([]);
  });
});
