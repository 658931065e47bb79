/**
 * The dashboard's failure-detector panel (dashboard/membership.ts): what it shows of `/cluster`'s
 * `membership`, which counts it highlights (docs/operations.md's alert table), the rise since the
 * previous poll, and nothing under gossip full; no dashboard file imports a core module at run time.
 */
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { zeroSwimStats } from "../../src/core/node/swim/types.js";
import {
  ALERT_WINDOW_S,
  type MembershipItem,
  type MembershipPanel,
  membershipPanel,
  noteRises,
  type RiseTimes,
  readMembership,
} from "../../src/server/dashboard/membership.js";
import type { MembershipCounts } from "../../src/server/runtime/cluster-view.js";

/** `/cluster`'s `membership` at zero: SWIM's counts and the peer port's `unsupported`. */
const zero: MembershipCounts = { ...zeroSwimStats(), unsupported: 0 };

function shown(p: MembershipPanel): Extract<MembershipPanel, { shown: true }> {
  if (!p.shown) throw new Error("panel hidden");
  return p;
}
const byKey = (p: MembershipPanel) => {
  const s = shown(p);
  return Object.fromEntries([...s.items, ...s.context].map((i) => [i.key, i])) as Record<
    keyof MembershipCounts,
    MembershipItem
  >;
};

describe("dashboard: the failure detector's panel", () => {
  it("is hidden when /cluster has no membership (gossip full, or an older node)", () => {
    expect(membershipPanel(readMembership(undefined, 1))).toEqual({ shown: false });
    expect(membershipPanel(readMembership(null, 1))).toEqual({ shown: false });
    expect(membershipPanel(readMembership([1, 2], 1))).toEqual({ shown: false });
    expect(membershipPanel(readMembership("refuted", 1))).toEqual({ shown: false });
  });

  it("shows the counts that matter first, every SWIM count once, none alerting at zero", () => {
    const p = shown(membershipPanel(readMembership({ ...zero, probes: 1234 }, 1)));
    expect(p.items.map((i) => i.key)).toEqual([
      "refuted",
      "suspected",
      "declaredDead",
      "invalid",
      "unsupported",
      "unknownSender",
      "implausibleIncarnations",
      "duplicateId",
    ]);
    // Every count of `membership` is on the panel, so a count added is not silently dropped.
    expect([...p.items, ...p.context].map((i) => i.key).sort()).toEqual(Object.keys(zero).sort());
    expect(p.alerting).toBe(0);
    expect(p.items.every((i) => !i.alert && i.value === "0" && i.rise === null)).toBe(true);
    expect(byKey(p).probes.value).toBe("1,234");
  });

  it("highlights refuted, invalid, implausible incarnations and a duplicate id when non-zero, not the others", () => {
    const all = Object.fromEntries(Object.keys(zero).map((k) => [k, 2])) as unknown as MembershipCounts;
    const p = membershipPanel(readMembership(all, 1));
    const alerting = Object.values(byKey(p))
      .filter((i) => i.alert)
      .map((i) => i.key)
      .sort();
    expect(alerting).toEqual(["duplicateId", "implausibleIncarnations", "invalid", "refuted"]);
    expect(shown(p).alerting).toBe(4);
    const one = byKey(membershipPanel(readMembership({ ...zero, refuted: 1 }, 1)));
    expect(one.refuted.alert).toBe(true);
    expect(one.invalid.alert).toBe(false);
    // Garbage gossip from an authenticated node (the peer port's refusals count here) alerts alone.
    const bad = byKey(membershipPanel(readMembership({ ...zero, invalid: 1 }, 1)));
    expect(bad.invalid.alert).toBe(true);
    expect(bad.suspected.alert).toBe(false);
    // A newer build's messages in a rolling upgrade are shown, and rise, but alert on nothing.
    const newer = membershipPanel(
      readMembership({ ...zero, unsupported: 5 }, 2),
      readMembership({ ...zero, unsupported: 1 }, 1),
    );
    expect(byKey(newer).unsupported).toMatchObject({ value: "5", rise: "+4 · 4/s", alert: false });
    expect(shown(newer).alerting).toBe(0);
  });

  it("keeps a rise highlighted for the alert rules' 10 min, then no longer; a new rise lights it again", () => {
    const at = (t: number, refuted: number) => readMembership({ ...zero, refuted }, t);
    let rises: RiseTimes = {};
    let prev: ReturnType<typeof at> | undefined;
    const poll = (t: number, refuted: number) => {
      const now = at(t, refuted);
      rises = noteRises(now, prev, rises);
      const item = byKey(membershipPanel(now, prev, rises)).refuted;
      prev = now;
      return item.alert;
    };
    expect(poll(0, 0)).toBe(false);
    expect(poll(5, 1)).toBe(true); // rose at 5 s
    expect(poll(5 + ALERT_WINDOW_S - 1, 1)).toBe(true);
    expect(poll(5 + ALERT_WINDOW_S, 1)).toBe(false); // quiet for the whole window
    expect(poll(5 + ALERT_WINDOW_S + 10, 3)).toBe(true);
    // A restarted node (its count fell) counts what it saw since as a rise.
    expect(poll(5 + 3 * ALERT_WINDOW_S, 1)).toBe(true);
    // A non-zero count at the page's first poll: when it rose is unknown, so it is taken as now.
    rises = {};
    prev = undefined;
    expect(poll(10_000, 7)).toBe(true);
    expect(poll(10_000 + ALERT_WINDOW_S - 1, 7)).toBe(true);
    expect(poll(10_000 + ALERT_WINDOW_S, 7)).toBe(false);
  });

  it("says how much each count rose since the previous poll, and how fast", () => {
    const before = readMembership({ ...zero, probes: 100, suspected: 1 }, 10);
    const now = readMembership({ ...zero, probes: 104, suspected: 4, refuted: 1 }, 12);
    const k = byKey(membershipPanel(now, before));
    expect(k.suspected.rise).toBe("+3 · 1.5/s");
    expect(k.refuted.rise).toBe("+1 · 0.5/s");
    expect(k.probes.rise).toBe("+4 · 2/s");
    expect(k.declaredDead.rise).toBeNull();
    // The first poll has nothing to compare with.
    expect(byKey(membershipPanel(now)).suspected.rise).toBeNull();
  });

  it("a count that fell is a restarted node: its new count is the rise", () => {
    const before = readMembership({ ...zero, suspected: 50 }, 10);
    const now = readMembership({ ...zero, suspected: 2 }, 11);
    expect(byKey(membershipPanel(now, before)).suspected.rise).toBe("+2 · 2/s");
  });

  it("keeps only whole non-negative numbers: anything else is shown as missing, never alerting", () => {
    const raw = {
      ...zero,
      refuted: "<img src=x>",
      invalid: -1,
      implausibleIncarnations: Number.NaN,
      suspected: 2.7,
      extra: 99,
    };
    const r = readMembership(raw, 1);
    expect(Object.keys(r?.counts ?? {})).not.toContain("extra");
    const k = byKey(membershipPanel(r));
    for (const key of ["refuted", "invalid", "implausibleIncarnations"] as const) {
      expect(k[key].value).toBe("–");
      expect(k[key].count).toBeNull();
      expect(k[key].alert).toBe(false);
    }
    expect(k.suspected.value).toBe("2");
  });

  it("no dashboard file imports anything but its siblings at run time (the browser loads no core)", () => {
    const dir = new URL("../../src/server/dashboard/", import.meta.url);
    const files = readdirSync(dir).filter((f) => f.endsWith(".ts"));
    expect(files).toContain("membership.ts");
    for (const file of files) {
      const ts = readFileSync(new URL(file, dir), "utf8");
      // verbatimModuleSyntax: an `import type` is erased, every other import stays in the script.
      for (const m of ts.matchAll(/^import\s+(type\s)?[^;]*?from\s+"([^"]+)";/gm))
        if (!m[1]) expect(m[2], `${file} imports ${m[2]}`).toMatch(/^\.\/[\w-]+\.js$/);
    }
  });
});
