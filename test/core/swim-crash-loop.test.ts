/**
 * An honest member in a crash loop whose restarts step its clock back: a check of it can read the
 * next process's hello, whose boot incarnation lies below what the previous process claimed. Read as
 * the member's own word, that took the claim down as a forgery (`implausibleIncarnations`) and left
 * the member's next raise ignored for the re-check interval. A hello says no incarnation until the
 * process has synced once (swim.ts `saidIncarnation`), so such a check says nothing and the claim stands.
 */
import { describe, expect, test } from "vitest";
import type { SwimMessage } from "../../src/core/node/swim/types.js";
import { harness } from "./swim-harness.js";
import { StormDriver, seededRandom } from "./swim-storm-driver.js";

const N = 12;
const SETTLE_MS = 20_000;
const LOOP_MS = 150_000;
const QUIET_MS = 30_000;
const X = "n5";

/**
 * X restarts for LOOP_MS, each life 0.2–1.8 s (a second on average: a supervisor's restarts are not
 * evenly spaced, and a short life dies with checks of its claims still asked of it), each start's
 * clock 3 s back or not, at random.
 */
function crashLoop(bootWord: boolean) {
  const d = new StormDriver(N, {}, 3);
  const random = seededRandom(102);
  // What a hello said before the fix: the process's incarnation from its first moment.
  if (bootWord) d.hello = (id) => d.swims.get(id)?.currentIncarnation;
  d.runUntil(SETTLE_MS);
  for (const [id, s] of d.swims) expect(s.liveMembers().length, id).toBe(N - 1);
  const others = () => [...d.swims].filter(([id]) => id !== X).map(([, s]) => s);
  const implausibleBefore = others().reduce((n, s) => n + s.stats.implausibleIncarnations, 0);
  let restarts = 0;
  for (let t = SETTLE_MS; t < SETTLE_MS + LOOP_MS; t += 200 + random() * 1_600) {
    d.runUntil(t);
    d.restart(X, random() < 0.5 ? -3_000 : 0);
    restarts++;
  }
  expect(restarts).toBeGreaterThan(100);
  d.runUntil(SETTLE_MS + LOOP_MS + QUIET_MS);
  const implausible = others().reduce((n, s) => n + s.stats.implausibleIncarnations, 0) - implausibleBefore;
  return { d, implausible, own: d.swims.get(X)?.currentIncarnation };
}

describe("a member crash-looping about every second, half its restarts with the clock 3 s back", () => {
  test("a check reading a fresh process's boot incarnation took the claim down (the false positive)", () => {
    expect(crashLoop(true).implausible).toBeGreaterThan(0);
  });

  test("a hello silent until synced: nothing counted implausible, every member holds X's own", () => {
    const r = crashLoop(false);
    expect(r.implausible).toBe(0);
    for (const [id, s] of r.d.swims) {
      if (id === X) continue;
      expect(s.status(X), id).toBe("alive");
      expect(s.memberViews().find((m) => m.id === X)?.incarnation, id).toBe(r.own);
    }
  });
});

describe("what a hello says of the incarnation (saidIncarnation)", () => {
  test("none until a member's list answers ours: not a seed's before it is verified, nor gossip", () => {
    const h = harness("a", ["s"], {}, 1_000);
    h.run(h.swim.start());
    expect(h.swim.saidIncarnation).toBeUndefined();
    const list: SwimMessage = {
      type: "sync",
      reply: false,
      members: [{ id: "s", status: "alive", incarnation: 0 }],
    };
    h.msg("s", list);
    expect(h.swim.saidIncarnation).toBeUndefined();
    h.run(h.swim.handle({ type: "verified", id: "s", ok: true }));
    // A member's gossip is news, not its list: what it holds of our previous life need not be in it.
    h.gossip("s", [{ id: "s", status: "alive", incarnation: 1 }]);
    expect(h.swim.saidIncarnation).toBeUndefined();
    h.msg("s", list);
    expect(h.swim.saidIncarnation).toBe(1_000);
    expect(h.swim.saidIncarnation).toBe(h.swim.currentIncarnation);
  });
});
