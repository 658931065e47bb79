/**
 * What the dashboard draws, derived from successive scrapes of the node's own `/metrics` and
 * `/cluster`: shares, rates, hit rates and latency quantiles over sliding windows. Pure (no DOM, no
 * clock): served to the browser as-is (compiled by the build, no bundler) and unit-tested in Node.
 */

/** One Prometheus sample line. */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The counters the dashboard reads from one scrape, taken at `t` (seconds). */
export interface Reading {
  t: number;
  /**
   * Requests each member has served, cluster-wide: this node's own count and each peer's as its
   * snapshots report it (`/cluster`'s `served`; see servedByMember).
   */
  servedBy: Record<string, number>;
  local: number;
  forwarded: number;
  promptTokens: number;
  predictedCached: number;
  actualCached: number;
  gossipIn: number;
  gossipOut: number;
  /** The latency histogram's cumulative buckets (all routes), upper bound (s) → count; sorted. */
  latency: [number, number][];
}

/** One point of every chart, at `t` (seconds); null where the window holds nothing to measure. */
export interface Point {
  t: number;
  /** Per member: its percentage of the requests the whole mesh served in the share window. */
  share: Record<string, number | null>;
  localPerSec: number;
  forwardedPerSec: number;
  predictedHitPct: number | null;
  actualHitPct: number | null;
  gossipInBytesPerSec: number;
  gossipOutBytesPerSec: number;
  p50Ms: number | null;
  p99Ms: number | null;
}

export const WINDOWS = {
  /** Share of requests by serving node, hit rates and latency quantiles (seconds). */
  slowSec: 30,
  /** Request and gossip rates (seconds). */
  rateSec: 5,
} as const;

/** Readings kept: the slow window at one scrape a second, with room to spare. */
const MAX_READINGS = 240;
/** Labels per sample and samples per scrape the parser accepts (a page must not hang on a huge body). */
const MAX_SAMPLES = 100_000;

const unescapeLabel = (s: string) => s.replace(/\\(.)/g, (_m, c: string) => (c === "n" ? "\n" : c));

function parseValue(v: string): number {
  if (v === "+Inf") return Number.POSITIVE_INFINITY;
  if (v === "-Inf") return Number.NEGATIVE_INFINITY;
  return Number(v);
}

/** Prometheus text exposition format → samples (comments and malformed lines skipped). */
export function parseMetrics(text: string): MetricSample[] {
  const out: MetricSample[] = [];
  const line = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/;
  const label = /([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"/g;
  for (const l of text.split("\n")) {
    if (l === "" || l.startsWith("#")) continue;
    const m = line.exec(l);
    if (!m) continue;
    const value = parseValue(m[3] as string);
    if (Number.isNaN(value)) continue; // not a sample (or NaN, which no chart can draw)
    const labels: Record<string, string> = {};
    for (const lm of (m[2] ?? "").matchAll(label)) labels[lm[1] as string] = unescapeLabel(lm[2] as string);
    out.push({ name: m[1] as string, labels, value });
    if (out.length >= MAX_SAMPLES) break;
  }
  return out;
}

/** Members counted from one `/cluster` (a member beyond it is left out: the page must stay small). */
const MAX_MEMBERS = 1024;

/** The parts of `/cluster` servedByMember reads. */
export interface ServedView {
  id: string;
  served?: unknown;
  peers?: readonly { id: string; served?: unknown }[];
}

/**
 * Each member's served requests from one `/cluster`: this node's own count and what each peer last
 * reported; a member with no count (an older node) is left out.
 */
export function servedByMember(v: ServedView): Record<string, number> {
  const out: Record<string, number> = {};
  const add = (id: unknown, n: unknown) => {
    if (typeof id === "string" && typeof n === "number" && Number.isFinite(n) && n >= 0) out[id] = n;
  };
  add(v.id, v.served);
  for (const p of (v.peers ?? []).slice(0, MAX_MEMBERS)) add(p.id, p.served);
  return out;
}

/** The dashboard's counters from one scrape of `/metrics`, with `/cluster`'s served counts. */
export function readingOf(
  samples: readonly MetricSample[],
  t: number,
  servedBy: Record<string, number> = {},
): Reading {
  const r: Reading = {
    t,
    servedBy,
    local: 0,
    forwarded: 0,
    promptTokens: 0,
    predictedCached: 0,
    actualCached: 0,
    gossipIn: 0,
    gossipOut: 0,
    latency: [],
  };
  const buckets = new Map<number, number>();
  for (const s of samples) {
    switch (s.name) {
      case "prefixmesh_requests_total":
        if (s.labels.route === "local") r.local += s.value;
        else if (s.labels.route === "forwarded") r.forwarded += s.value;
        break;
      case "prefixmesh_prompt_tokens_total":
        r.promptTokens += s.value;
        break;
      case "prefixmesh_predicted_cached_tokens_total":
        r.predictedCached += s.value;
        break;
      case "prefixmesh_actual_cached_tokens_total":
        r.actualCached += s.value;
        break;
      case "prefixmesh_gossip_bytes_total":
        if (s.labels.direction === "in") r.gossipIn += s.value;
        else if (s.labels.direction === "out") r.gossipOut += s.value;
        break;
      case "prefixmesh_request_duration_seconds_bucket": {
        const le = parseValue(s.labels.le ?? "");
        if (!Number.isNaN(le)) buckets.set(le, (buckets.get(le) ?? 0) + s.value);
        break;
      }
    }
  }
  r.latency = [...buckets].sort((a, b) => a[0] - b[0]);
  return r;
}

/** A counter's increase; a drop means the node restarted (its counters began again from 0). */
export const increase = (before: number, after: number): number => (after >= before ? after - before : after);

/**
 * The q-quantile of the observations a cumulative histogram's increase holds, interpolated linearly
 * inside the bucket it falls in (as Prometheus's histogram_quantile); null with no observations. In
 * the +Inf bucket it answers the highest finite bound.
 */
export function quantile(q: number, cumulative: readonly [number, number][]): number | null {
  const total = cumulative.at(-1)?.[1] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, count] of cumulative) {
    if (count >= rank) {
      if (le === Number.POSITIVE_INFINITY) return prevLe;
      const inBucket = count - prevCount;
      return inBucket <= 0 ? le : prevLe + ((le - prevLe) * (rank - prevCount)) / inBucket;
    }
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}

function latencyIncrease(a: Reading, b: Reading): [number, number][] {
  const before = new Map(a.latency);
  return b.latency.map(([le, n]) => [le, increase(before.get(le) ?? 0, n)]);
}

const pct = (part: number, whole: number): number | null => (whole > 0 ? (100 * part) / whole : null);

/** The readings of the last few minutes and the chart points derived from them. */
export class History {
  private readonly readings: Reading[] = [];
  readonly points: Point[] = [];

  constructor(private readonly maxPoints = 600) {}

  /** The reading `sec` seconds before the newest (or the oldest kept). */
  private before(sec: number): Reading | undefined {
    const newest = this.readings.at(-1);
    if (!newest) return undefined;
    let found: Reading | undefined;
    for (let i = this.readings.length - 2; i >= 0; i--) {
      found = this.readings[i];
      if ((found as Reading).t <= newest.t - sec) break;
    }
    return found;
  }

  /**
   * Member `id`'s served count at the window starting at reading `from`; for a member first heard of
   * inside the window, its first count (what it served before is not in the window).
   */
  private baseline(from: Reading, id: string): number | undefined {
    for (let i = this.readings.indexOf(from); i >= 0 && i < this.readings.length; i++) {
      const n = (this.readings[i] as Reading).servedBy[id];
      if (n !== undefined) return n;
    }
    return undefined;
  }

  /** Adds a scrape; returns the new point (undefined for the first scrape: no interval yet). */
  add(r: Reading): Point | undefined {
    const last = this.readings.at(-1);
    if (last && r.t <= last.t) return undefined; // a clock going back: keep the series monotonic
    this.readings.push(r);
    if (this.readings.length > MAX_READINGS) this.readings.shift();
    const slow = this.before(WINDOWS.slowSec);
    const fast = this.before(WINDOWS.rateSec);
    if (!slow || !fast) return undefined;
    const inc = (w: Reading, f: (x: Reading) => number) => increase(f(w), f(r));
    const perSec = (f: (x: Reading) => number) => inc(fast, f) / (r.t - fast.t);

    const share: Record<string, number | null> = {};
    const served: Record<string, number> = {};
    let answered = 0;
    for (const [id, n] of Object.entries(r.servedBy)) {
      const before = this.baseline(slow, id);
      served[id] = before === undefined ? 0 : increase(before, n);
      answered += served[id] as number;
    }
    for (const [id, n] of Object.entries(served)) share[id] = pct(n, answered);

    const prompt = inc(slow, (x) => x.promptTokens);
    const lat = latencyIncrease(slow, r);
    const ms = (q: number) => {
      const s = quantile(q, lat);
      return s === null ? null : s * 1000;
    };
    const p: Point = {
      t: r.t,
      share,
      localPerSec: perSec((x) => x.local),
      forwardedPerSec: perSec((x) => x.forwarded),
      predictedHitPct: pct(
        inc(slow, (x) => x.predictedCached),
        prompt,
      ),
      actualHitPct: pct(
        inc(slow, (x) => x.actualCached),
        prompt,
      ),
      gossipInBytesPerSec: perSec((x) => x.gossipIn),
      gossipOutBytesPerSec: perSec((x) => x.gossipOut),
      p50Ms: ms(0.5),
      p99Ms: ms(0.99),
    };
    this.points.push(p);
    if (this.points.length > this.maxPoints) this.points.shift();
    return p;
  }
}
