/**
 * The dashboard's failure-detector panel (`/cluster`'s `membership`, gossip "scuttlebutt" only): which
 * SWIM counts it shows, which of them to alert on (docs/operations.md, "What to alert on": a rise in
 * the last 10 min) and how much each rose since the previous poll. Text only, no DOM, so it is
 * unit-tested in Node; membership-view.ts puts each part in its own element as text.
 */

// A type only (erased): the browser loads just the files dashboard.ts serves, never core's.
import type { SwimStats } from "../../core/node/swim/types.js";
import { increase } from "./series.js";

/** `/cluster`'s `membership`: SWIM's counts and the peer port's `unsupported` (runtime/cluster-view.ts). */
type Key = keyof SwimStats | "unsupported";

/** The SWIM counts of one poll, taken at `t` (seconds); a count the node did not give is absent. */
export interface MembershipReading {
  t: number;
  counts: Partial<Record<Key, number>>;
}

/** One count as the panel shows it. */
export interface MembershipItem {
  key: Key;
  label: string;
  /** What it means (the element's title). */
  hint: string;
  /** The count, formatted; "–" when the node did not give one. */
  value: string;
  /** The count (null: not given). */
  count: number | null;
  /** "+2 · 0.4/s" since the previous poll; null when it did not rise (or there is no previous poll). */
  rise: string | null;
  /** An alerting count that rose in the last ALERT_WINDOW_S (as the alert rule reads it): highlighted. */
  alert: boolean;
}

export type MembershipPanel =
  | { shown: false }
  | {
      shown: true;
      /** The counts that matter, each on its own. */
      items: MembershipItem[];
      /** The rest, on one muted line: what shows the detector at work. */
      context: MembershipItem[];
      /** How many items alert. */
      alerting: number;
    };

interface Shown {
  key: Key;
  label: string;
  hint: string;
  /** A rise is a condition of docs/operations.md's alert table. */
  alerts?: true;
}

/** The counts that matter, in the panel's order. */
const MAIN: readonly Shown[] = [
  {
    key: "refuted",
    label: "refuted",
    hint: "Suspicions of this node it outbid while alive: its event loop lags or its network drops packets; peers may route away from it",
    alerts: true,
  },
  {
    key: "suspected",
    label: "suspicions raised",
    hint: "Members this node marked suspect; rising with few declared dead: false suspicions of others",
  },
  { key: "declaredDead", label: "declared dead", hint: "Members this node declared dead" },
  {
    key: "invalid",
    label: "invalid messages",
    hint: "Mesh messages from an authenticated node that did not decode or were over the entry bound, refused: a broken or hostile member",
    alerts: true,
  },
  {
    // Not an alert's: a rolling upgrade's newer nodes send these until every node runs their build.
    key: "unsupported",
    label: "newer protocol",
    hint: "Mesh messages refused because their sender speaks a newer protocol (its hello says so): expected while a rolling upgrade runs, gone once this node is upgraded too",
  },
  {
    key: "unknownSender",
    label: "unknown sender",
    hint: "Messages from a sender that is not a verified member (a joining node's first messages are)",
  },
  {
    key: "implausibleIncarnations",
    label: "implausible incarnations",
    hint: "News refused for an incarnation past what a clock allows, or past what the member's own hello said: forged gossip, a clock far off, or two processes with that member's id",
    alerts: true,
  },
  {
    key: "duplicateId",
    label: "duplicate id",
    hint: "Records of this node's id from another live process (a copied config, an old process cut off by a partition): give each process its own id",
    alerts: true,
  },
];

/** The rest, for context. */
const CONTEXT: readonly Shown[] = [
  { key: "probes", label: "probes", hint: "Direct probes sent" },
  { key: "indirectProbes", label: "indirect", hint: "Relays asked to probe for this node" },
  { key: "verified", label: "verified", hint: "Candidates admitted as members" },
  { key: "refusedMembers", label: "refused", hint: "Candidates whose check failed" },
  { key: "rechecks", label: "re-checks", hint: "Refused candidates asked again" },
  {
    key: "rechecksDropped",
    label: "re-checks dropped",
    hint: "Re-checks due but dropped: the candidate queue was full",
  },
  {
    key: "candidatesDropped",
    label: "candidates dropped",
    hint: "Candidates dropped: the candidate set was full",
  },
];

const KEYS: readonly Key[] = [...MAIN, ...CONTEXT].map((s) => s.key);

/** How long a rise of an alerting count stays highlighted: the alert rules' `increase(…[10m]) > 0`. */
export const ALERT_WINDOW_S = 600;

/** When (seconds, as readings' `t`) each alerting count was last seen to rise. */
export type RiseTimes = Partial<Record<Key, number>>;

/**
 * The rise times after this poll. A count seen to rise (a fall is a restart: counted as a rise) is
 * stamped now; a non-zero count at the page's first poll is too, as when it rose is unknown.
 */
export function noteRises(
  now: MembershipReading | undefined,
  prev: MembershipReading | undefined,
  times: RiseTimes,
): RiseTimes {
  if (!now) return {};
  const next: RiseTimes = {};
  for (const s of MAIN) {
    if (!s.alerts) continue;
    const count = now.counts[s.key];
    const before = prev?.counts[s.key];
    const rose =
      count !== undefined &&
      (before === undefined ? count > 0 && times[s.key] === undefined : increase(before, count) > 0);
    const t = rose ? now.t : times[s.key];
    if (t !== undefined) next[s.key] = t;
  }
  return next;
}

/**
 * `/cluster`'s `membership` as a reading; undefined when the node has none (gossip "full", or an older
 * node). Only the known counts are read, and only whole non-negative numbers kept.
 */
export function readMembership(raw: unknown, t: number): MembershipReading | undefined {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return undefined;
  const counts: Partial<Record<Key, number>> = {};
  for (const k of KEYS) {
    const v = (raw as Record<string, unknown>)[k];
    if (typeof v === "number" && Number.isFinite(v) && v >= 0) counts[k] = Math.floor(v);
  }
  return { t, counts };
}

const fmtCount = (n: number) => n.toLocaleString("en-US");

/** A rate for the page: two significant digits under 10, whole numbers above. */
const fmtRate = (perSec: number) =>
  perSec < 10 ? `${Number(perSec.toPrecision(2))}/s` : `${fmtCount(Math.round(perSec))}/s`;

function item(
  s: Shown,
  now: MembershipReading,
  prev: MembershipReading | undefined,
  rises: RiseTimes,
): MembershipItem {
  const count = now.counts[s.key] ?? null;
  const before = prev?.counts[s.key];
  let rise: string | null = null;
  if (count !== null && before !== undefined && prev) {
    // A drop is the node's restart (its counts began again): what it counted since is the rise.
    const up = increase(before, count);
    const dt = now.t - prev.t;
    if (up > 0) rise = dt > 0 ? `+${fmtCount(up)} · ${fmtRate(up / dt)}` : `+${fmtCount(up)}`;
  }
  return {
    key: s.key,
    label: s.label,
    hint: s.hint,
    value: count === null ? "–" : fmtCount(count),
    count,
    rise,
    alert: s.alerts === true && count !== null && now.t - (rises[s.key] ?? -Infinity) < ALERT_WINDOW_S,
  };
}

/**
 * The panel for this poll's reading, with the rises since the previous poll's; `rises` (noteRises,
 * this poll included) says which alerting counts rose lately. Without it, as at a first poll: a
 * non-zero alerting count is taken to have just risen.
 */
export function membershipPanel(
  now: MembershipReading | undefined,
  prev?: MembershipReading,
  rises: RiseTimes = noteRises(now, prev, {}),
): MembershipPanel {
  if (!now) return { shown: false };
  const items = MAIN.map((s) => item(s, now, prev, rises));
  return {
    shown: true,
    items,
    context: CONTEXT.map((s) => item(s, now, prev, rises)),
    alerting: items.filter((i) => i.alert).length,
  };
}
