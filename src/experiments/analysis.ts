/**
 * Derived measurements: the per-node share of a subject's requests over time (Figures 3-4: window
 * of 300 requests, stride 30) and the zones of the specialization–eviction cycle.
 */

export const WINDOW = 300;
export const STRIDE = 30;
/** A window is "specialized" when one node serves at least this share of the subject's requests. */
export const SPECIALIZED_SHARE = 0.9;

export interface ShareWindow {
  /** Global request index of the window's last request (the time axis). */
  x: number;
  /** Share of the window's requests served by each node. */
  shares: number[];
}

/**
 * Sliding windows over one subject's requests, in schedule order. Subjects with fewer requests than
 * the window get one window over all of them.
 */
export function shareWindows(
  groups: readonly string[],
  served: readonly number[],
  subject: string,
  nodes: number,
  window = WINDOW,
  stride = STRIDE,
): ShareWindow[] {
  const idx: number[] = [];
  groups.forEach((g, i) => {
    if (g === subject && (served[i] ?? -1) >= 0) idx.push(i);
  });
  const w = Math.min(window, idx.length);
  const out: ShareWindow[] = [];
  if (w === 0) return out;
  const counts = new Array<number>(nodes).fill(0);
  for (let i = 0; i < w; i++) counts[served[idx[i]!]!]!++;
  let start = 0;
  for (let end = w; end <= idx.length; end += stride) {
    // Slide from the previous window [start, start + w) to [end - w, end).
    while (start < end - w) {
      counts[served[idx[start]!]!]!--;
      counts[served[idx[start + w]!]!]!++;
      start++;
    }
    out.push({ x: idx[end - 1]!, shares: counts.map((c) => c / w) });
  }
  return out;
}

export type Zone = "competitive" | "specialized" | "re-dispersed";

export interface ZoneSegment {
  zone: Zone;
  /** x-range (global request indices) covered. */
  from: number;
  to: number;
  windows: number;
  /** The dominant node while specialized. */
  node?: number;
}

/**
 * The paper's three zones, read off the windows: before any node first reaches SPECIALIZED_SHARE the
 * subject is contested (zone 1); windows at or above it are specialization (zone 2); windows below
 * it after a specialization are re-dispersion (zone 3, the paper's eviction phase).
 */
export function zones(windows: readonly ShareWindow[]): ZoneSegment[] {
  const segs: ZoneSegment[] = [];
  let specializedOnce = false;
  let prevX = windows[0]?.x ?? 0;
  for (const w of windows) {
    const top = Math.max(...w.shares);
    const node = w.shares.indexOf(top);
    const zone: Zone =
      top >= SPECIALIZED_SHARE ? "specialized" : specializedOnce ? "re-dispersed" : "competitive";
    if (zone === "specialized") specializedOnce = true;
    const last = segs[segs.length - 1];
    if (last && last.zone === zone && (zone !== "specialized" || last.node === node)) {
      last.to = w.x;
      last.windows++;
    } else {
      segs.push({
        zone,
        from: last ? prevX : w.x,
        to: w.x,
        windows: 1,
        ...(zone === "specialized" ? { node } : {}),
      });
    }
    prevX = w.x;
  }
  return segs;
}

/** Summary used by the report: how many windows fall in each zone and how many specialists took over. */
export function zoneSummary(segs: readonly ZoneSegment[]): Record<Zone, number> & { specialists: number } {
  const out = { competitive: 0, specialized: 0, "re-dispersed": 0, specialists: 0 };
  for (const s of segs) {
    out[s.zone] += s.windows;
    if (s.zone === "specialized") out.specialists++;
  }
  return out;
}

/** Requests per subject in a workload. */
export function groupCounts(groups: readonly string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const g of groups) m.set(g, (m.get(g) ?? 0) + 1);
  return m;
}

/** The `k` subjects with the most requests in every one of the given workloads (max of the min count). */
export function pickSubjects(workloadGroups: readonly (readonly string[])[], k = 2): string[] {
  const counts = workloadGroups.map(groupCounts);
  const all = [...counts[0]!.keys()];
  const score = (s: string) => Math.min(...counts.map((c) => c.get(s) ?? 0));
  return all.sort((a, b) => score(b) - score(a) || a.localeCompare(b)).slice(0, k);
}

/** Δcomm at which routed latency equals no-route, by linear interpolation of the gap between two Δcomm points. */
export function breakEvenMs(c1: number, gap1: number, c2: number, gap2: number): number | undefined {
  if (gap1 === gap2) return undefined;
  const c = c1 + ((0 - gap1) * (c2 - c1)) / (gap2 - gap1);
  return Number.isFinite(c) ? c : undefined;
}
