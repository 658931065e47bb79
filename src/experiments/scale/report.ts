/**
 * The scale report: report.md (the issue's targets with the measured values beside them, met or
 * not; the tables; what was not run and why), results.json and the figures as SVG + PNG.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { TopLevelSpec } from "vega-lite";
import { renderVegaLite } from "../render.js";
import { HIT_BUCKET_MS, hitFrom, type NodeCell } from "./execute.js";
import { bytesVsN, convergenceVsN, detectionVsN, hitVsN, type SeriesPoint } from "./figures.js";
import { arrivalSAt, BOUNDED_ESTIMATES, COMM_MS, LOSS, MODES, POLL_MS, RATE_PER_NODE } from "./grid.js";
import { DETECT_EVERY_MS } from "./probe.js";
import type { ScaleOutcome } from "./run.js";

export interface ScaleContext {
  command: string;
  loadBefore: number;
  loadAfter: number;
  cores: number;
}

const mark = (ok: boolean) => (ok ? "met" : "**not met**");
const f = (x: number | undefined, d = 1) => (x === undefined || !Number.isFinite(x) ? "—" : x.toFixed(d));
const s = (ms: number | undefined) => (ms === undefined ? "not reached" : (ms / 1000).toFixed(2));
const pct = (x: number | undefined) => (x === undefined ? "—" : `${(100 * x).toFixed(1)}%`);
const median = (xs: number[]) => {
  if (xs.length === 0) return undefined;
  const v = [...xs].sort((a, b) => a - b);
  return v[Math.floor((v.length - 1) / 2)];
};

function cell(o: ScaleOutcome, kind: NodeCell["kind"], mode: string, n: number): NodeCell | undefined {
  return o.cells.find((c) => c.kind === kind && c.mode === mode && c.nodes === n);
}

function skipReason(o: ScaleOutcome, kind: NodeCell["kind"], mode: string, n: number): string | undefined {
  return o.skipped.find((c) => c.kind === kind && c.mode === mode && c.nodes === n)?.reason;
}

/** Median over the tracked changes of the time to reach a share; undefined if any did not reach it. */
function spreadMs(c: NodeCell, k: "p50Ms" | "p99Ms" | "p100Ms"): number | undefined {
  const done = c.spreads.filter((x) => x.changedAtMs !== undefined);
  if (done.length === 0 || done.some((x) => x[k] === undefined)) return undefined;
  return median(done.map((x) => x[k] as number));
}

/**
 * Bytes with --max-estimates: a node holds and is sent changes of at most M owners, so its traffic is
 * M × the owners' change rate, not N; with every owner held (M ≥ N − 1) it still grows with N.
 */
export function boundedBytes(o: ScaleOutcome): string[] {
  const out: string[] = [];
  const bc = o.nodes.flatMap((n) => {
    const c = cell(o, "bounded", "scuttlebutt", n);
    return c ? [c] : [];
  });
  // The target compares with 16 nodes; the smallest N when 16 was not run.
  const last = bc[bc.length - 1];
  const first = bc.find((c) => c.nodes === 16 && c !== last) ?? bc[0];
  if (first && last && last !== first) {
    const verdict = (r: number) =>
      last.nodes === 1024 && first.nodes === 16
        ? mark(r <= 2)
        : `not decided (${last.nodes} vs ${first.nodes})`;
    const whole = last.gossipBytesPerNodeS / first.gossipBytesPerNodeS;
    out.push(
      `  - With --max-estimates ${o.boundedEstimates} (node simulator; owners push their changes to their holders), **whole run** (formation and the drain after the arrivals included): ${bc.map((c) => `${c.nodes}: ${f(c.gossipBytesPerNodeS, 0)} B/s`).join(", ")} — ${last.nodes} vs ${first.nodes} nodes ${f(whole, 2)}× — ${verdict(whole)}.`,
    );
    const a = first.steady;
    const z = last.steady;
    // A window past the arrivals (formation outlasted them) is the drain: no verdict from it.
    const drain = [first, last].filter((c) => c.steady?.afterArrivals).map((c) => c.nodes);
    // The largest N whose window lies within its arrivals, compared instead (not the target's N).
    const inArrivals = [...bc].reverse().find((c) => c !== first && c.steady && !c.steady.afterArrivals);
    const instead =
      inArrivals?.steady && a && !a.afterArrivals
        ? `; measured instead: ${inArrivals.nodes} vs ${first.nodes} nodes ${f(inArrivals.steady.gossipBytesPerNodeS / a.gossipBytesPerNodeS, 2)}×`
        : "";
    const steadyVerdict = (r: number) =>
      drain.length > 0
        ? `not decided (at ${drain.join(" and ")} nodes membership formed only after the arrivals: that window is the drain)${instead}`
        : verdict(r);
    out.push(
      a && z
        ? `  - With --max-estimates ${o.boundedEstimates}, **steady state after formation** (from every node seeing every other live to the end of the arrivals; the window per N in parentheses): ${bc.map((c) => (c.steady ? `${c.nodes}: ${f(c.steady.gossipBytesPerNodeS, 0)} B/s (${s(c.steady.fromMs)}–${s(c.steady.toMs)} s; membership ${f(c.steady.membershipBytesPerNodeS, 0)})` : `${c.nodes}: not formed`)).join(", ")} — ${last.nodes} vs ${first.nodes} nodes ${f(z.gossipBytesPerNodeS / a.gossipBytesPerNodeS, 2)}× — ${steadyVerdict(z.gossipBytesPerNodeS / a.gossipBytesPerNodeS)}.`
        : `  - With --max-estimates ${o.boundedEstimates}, steady state after formation: not measured (membership did not form within the run at ${[
            first,
            last,
          ]
            .filter((c) => !c.steady)
            .map((c) => c.nodes)
            .join(" and ")} nodes).`,
    );
  }
  for (const m of [undefined, o.boundedEstimates]) {
    const rs = o.rounds.filter((r) => r.maxEstimates === m);
    const a = rs.find((r) => r.nodes === 16);
    const z = rs[rs.length - 1];
    if (!a || !z || z === a) continue;
    const at64 = rs.find((r) => r.nodes === 64);
    out.push(
      `  - Scuttlebutt alone, every owner changing once a round, ${m === undefined ? "every owner held" : `--max-estimates ${m}`}: ${rs.map((r) => `${r.nodes}: ${f(r.busyBytesPerNodeRound, 0)} B/node/round`).join(", ")} — ${z.nodes} vs 16 = ${f(z.busyBytesPerNodeRound / a.busyBytesPerNodeRound, 2)}×${at64 && at64 !== z ? `, vs 64 = ${f(z.busyBytesPerNodeRound / at64.busyBytesPerNodeRound, 2)}×` : ""}; held estimates at their owner's version: ${rs.map((r) => pct(r.currentShare)).join(", ")}.`,
    );
  }
  return out;
}

function targets(o: ScaleOutcome): string[] {
  const out: string[] = ["## Targets (issue 14), measured", ""];
  const top = o.nodes[o.nodes.length - 1] as number;
  // 1. bytes at 1,024 vs 16; heartbeat-only independent of N.
  const sb = (n: number) => cell(o, "main", "scuttlebutt", n);
  const fb = (n: number) => cell(o, "main", "full", n);
  const at16 = sb(16);
  const atTop = sb(1024);
  if (at16 && atTop) {
    const r = atTop.gossipBytesPerNodeS / at16.gossipBytesPerNodeS;
    out.push(
      `- Gossip bytes per node per second at 1,024 ≤ 2× that at 16 (scuttlebutt): ${f(atTop.gossipBytesPerNodeS, 0)} B/s vs ${f(at16.gossipBytesPerNodeS, 0)} B/s = ${f(r, 2)}× — ${mark(r <= 2)}`,
    );
  } else {
    const big = [...o.nodes].reverse().find((n) => n > 16 && sb(n));
    const ratio =
      at16 && big
        ? `; measured instead: ${big} nodes ${f(sb(big)?.gossipBytesPerNodeS, 0)} B/s vs 16 nodes ${f(at16.gossipBytesPerNodeS, 0)} B/s = ${f((sb(big)?.gossipBytesPerNodeS ?? 0) / at16.gossipBytesPerNodeS, 2)}×`
        : "";
    out.push(
      `- Gossip bytes per node per second at 1,024 ≤ 2× that at 16: **not measured** at 1,024 (${skipReason(o, "main", "scuttlebutt", 1024) ?? `grid stops at ${top} nodes`})${ratio} — ${ratio && big && at16 && (sb(big)?.gossipBytesPerNodeS ?? 0) > 2 * at16.gossipBytesPerNodeS ? "**not met** already at " + big : "not decided"}`,
    );
  }
  const fullGrowth =
    fb(16) && fb(top)
      ? (fb(top) as NodeCell).gossipBytesPerNodeS / (fb(16) as NodeCell).gossipBytesPerNodeS
      : undefined;
  if (fullGrowth !== undefined && top > 16)
    out.push(`  - Full mesh for comparison: ${top} vs 16 nodes = ${f(fullGrowth, 1)}×.`);
  out.push(...boundedBytes(o));
  const sw = o.membership.filter((m) => m.loss === 0);
  if (sw.length > 1) {
    const v = sw.map((m) => m.steadyBytesPerNodeS);
    const r = Math.max(...v) / Math.min(...v);
    out.push(
      `- Heartbeat-only (SWIM alone, steady state: the 10 s before the crash, after formation) traffic per node independent of N: ${sw.map((m) => `${m.nodes}: ${f(m.steadyBytesPerNodeS, 1)} B/s`).join(", ")} — max/min ${f(r, 2)}× — ${mark(r <= 1.5)} (read as "within 1.5×")`,
      `  - Not in that window: formation (every node joining at once through two seeds), per node ${sw.map((m) => `${m.nodes}: ${f(m.formationBytesPerNode / 1000, 1)} kB over ${s(m.formationMs)} s`).join(", ")}; and the periodic push-pull (our whole member list; the answer names what it lacks: in a settled cluster, the partner alone), on average ${sw.map((m) => `${m.nodes}: ${f(m.pushPullBytesPerNodeS, 1)} B/s`).join(", ")} (grows as N / log N).`,
    );
  }
  // 2. rounds to every node.
  for (const n of [256, 1024]) {
    const rc = o.rounds.find((r) => r.nodes === n && r.maxEstimates === undefined);
    const rb = o.rounds.find((r) => r.nodes === n && r.maxEstimates !== undefined);
    const bound = 2 * Math.log2(n);
    if (!rc) {
      out.push(
        `- A change reaches every node in ≤ 2·log2 N = ${bound} rounds at N = ${n}: **not measured** (grid stops at ${top} nodes)`,
      );
      continue;
    }
    const timed = sb(n);
    const t100 = timed ? spreadMs(timed, "p100Ms") : undefined;
    const timedTxt = timed
      ? `; in the node simulator: ${t100 === undefined ? "not every change reached every node within 10 s" : `${s(t100)} s = ${f(t100 / POLL_MS, 1)} Δpoll`}`
      : "";
    out.push(
      `- A change reaches every node in ≤ 2·log2 N = ${bound} rounds at N = ${n}: ${rc.p100 === undefined ? `not within ${rc.maxRounds} rounds` : `${rc.p100} rounds`} (Scuttlebutt alone)${timedTxt} — ${mark(rc.p100 !== undefined && rc.p100 <= bound && (timed === undefined || (t100 !== undefined && t100 / POLL_MS <= bound)))}`,
    );
    if (rb)
      out.push(
        `  - With --max-estimates ${rb.maxEstimates}: every node holding the owner has the change after ${rb.p100 === undefined ? `more than ${rb.maxRounds}` : rb.p100} rounds (Scuttlebutt alone) — ${mark(rb.p100 !== undefined && rb.p100 <= bound)}`,
      );
  }
  // 3. detection and false suspicions.
  for (const m of sw) {
    out.push(
      `- Crash detected by every member within memberlist's bound, N = ${m.nodes}: last member declared it dead after ${s(m.lastDeadMs)} s (${m.declaredDead}/${m.observers}), bound ${s(m.boundMs)} s — ${mark(m.lastDeadMs !== undefined && m.lastDeadMs <= m.boundMs)}`,
    );
  }
  const lossy = o.membership.filter((m) => m.loss === LOSS);
  const fs = lossy
    .map((m) => `${m.nodes}: ${m.falseSuspicions} (${m.falselySuspectedMembers} members)`)
    .join(", ");
  out.push(
    `- 0 false suspicions of live nodes under ${LOSS * 100}% loss over the whole run (SWIM, suspect declarations by any member): ${fs} — ${mark(lossy.every((m) => m.falseSuspicions === 0))}`,
  );
  // 4. hit rate vs oracle; memory.
  for (const n of o.nodes) {
    const or = cell(o, "oracle", "full", n);
    const parts = MODES.map((mode) => {
      const c = cell(o, "main", mode, n);
      return c && or
        ? `${mode} ${pct(c.hit)} = ${f(c.hit / or.hit, 3)}×`
        : `${mode} ${c ? pct(c.hit) : "not run"}`;
    });
    const bn = cell(o, "bounded", "scuttlebutt", n);
    if (bn)
      parts.push(
        `scuttlebutt --max-estimates ${o.boundedEstimates} ${pct(bn.hit)}${or ? ` = ${f(bn.hit / or.hit, 3)}×` : ""}`,
      );
    const ok =
      or !== undefined &&
      MODES.every((mode) => {
        const c = cell(o, "main", mode, n);
        return c !== undefined && c.hit >= 0.95 * or.hit;
      });
    // The bounded cell has its own verdict: the unbounded modes meeting it says nothing of M.
    const boundedMark =
      bn && or ? `; with --max-estimates ${o.boundedEstimates}: ${mark(bn.hit >= 0.95 * or.hit)}` : "";
    // A mode not run (skipped, or left out by --series) decides nothing either way.
    const both = MODES.every((mode) => cell(o, "main", mode, n) !== undefined);
    out.push(
      `- Hit rate ≥ 0.95 × the oracle's, N = ${n}: oracle ${or ? pct(or.hit) : `not run (${skipReason(o, "oracle", "full", n) ?? "—"})`}; ${parts.join("; ")} — ${or ? `${both ? mark(ok) : "not decided"} (full and scuttlebutt)${boundedMark}` : "not measured"}`,
    );
    if (or) out.push(`  - ${afterFormation(o, n, or)}`);
  }
  const b = o.cells.filter((c) => c.kind === "bounded").at(-1);
  const bSkip = o.skipped.find((c) => c.kind === "bounded");
  out.push(
    b
      ? `- Memory per node ≤ 64 MB at ${b.nodes} nodes with --max-estimates ${o.boundedEstimates}: ${f((b.heapPerNodeBytes ?? 0) / 1e6, 2)} MB — ${b.nodes !== 1024 ? "measured below 1,024 only" : o.boundedEstimates !== BOUNDED_ESTIMATES ? `not decided (the target names --max-estimates ${BOUNDED_ESTIMATES})` : mark((b.heapPerNodeBytes ?? Infinity) <= 64e6)}`
      : `- Memory per node ≤ 64 MB at 1,024 nodes with --max-estimates ${o.boundedEstimates}: **not measured** (${bSkip?.reason ?? `grid stops at ${top} nodes`})`,
  );
  out.push(
    "- Fault-schedule invariants in the new mode (≥ 200 seeds, soak): not part of this command (the seeded fault tests and the soak measure them).",
    "",
  );
  return out;
}

/**
 * The same comparison over the requests that arrived once all three runs at `n` had formed (99% of
 * the live pairs routable; the last stragglers of a large SWIM join can take many seconds more):
 * steady state, without the cluster's start-up.
 */
function afterFormation(o: ScaleOutcome, n: number, or: NodeCell): string {
  const runs = [or, ...MODES.map((mode) => cell(o, "main", mode, n))];
  const formed = runs.map((c) => c?.formed99AtMs);
  if (formed.some((t) => t === undefined)) return "after formation: not measured (a run never formed)";
  const from = Math.max(...(formed as number[]));
  const orHit = hitFrom(or.hitByArrival, from);
  if (orHit === undefined) return `after formation: no arrivals after ${s(from)} s`;
  let ok = true;
  const parts = MODES.map((mode) => {
    const h = hitFrom((cell(o, "main", mode, n) as NodeCell).hitByArrival, from);
    ok &&= h !== undefined && h >= 0.95 * orHit;
    return `${mode} ${pct(h)} = ${f(h === undefined ? undefined : h / orHit, 3)}×`;
  });
  return `after formation (arrivals from ${s(from)} s, when all three runs had formed): oracle ${pct(orHit)}; ${parts.join("; ")} — ${mark(ok)}`;
}

export async function writeScaleReport(o: ScaleOutcome, ctx: ScaleContext, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const L: string[] = [];
  L.push("# Scale: the full mesh vs SWIM + Scuttlebutt, 4 to 1,024 nodes", "");
  L.push(
    `Generated by \`${ctx.command}\` in ${(o.wallMs / 1000).toFixed(0)} s wall (${(o.cpuMs / 1000).toFixed(0)} s CPU) on ${ctx.cores} cores shared with other work (1-minute load ${ctx.loadBefore.toFixed(1)} before, ${ctx.loadAfter.toFixed(1)} after): wall-clock figures are inflated by that load; CPU times (this process's user + system during a run) much less so.`,
    "",
  );
  if (o.synthetic) L.push("**SYNTHETIC workload** (MMLU-shaped, generated): pass `--mmlu-dir` for MMLU.", "");
  L.push(
    `Setting: ${o.synthetic ? "synthetic MMLU-shaped" : "MMLU (uniform subjects)"} open loop, Poisson arrivals at ${RATE_PER_NODE} requests/s per node for ${o.arrivalS} s${o.minRequests > 0 ? ` or, where that makes fewer than ${o.minRequests} requests, long enough for ${o.minRequests} (${o.nodes.map((n) => `${n} nodes: ${f(arrivalSAt(o, n), 1)} s`).join(", ")}; CPU times are projected per ${o.arrivalS} s of arrivals)` : ""}, Δcomm ${COMM_MS} ms (±0.5 ms), Δpoll ${POLL_MS} ms, policy cost-aware, the paper's H100 cost profile; node n(N−1) crashes half-way through the arrivals; every run ends 1.5 s after its last answer. Both modes run the unchanged core: \`full\` = the paper's full mesh (every Δpoll a snapshot or heartbeat to every peer), \`scuttlebutt\` = SWIM + Lifeguard joined through n0 and n1, Scuttlebutt digests with 3 members per Δpoll.`,
    "",
  );
  L.push(...targets(o));
  L.push("## How each figure is measured", "");
  L.push(
    "- **Bytes and messages**: every message the nodes send, sized as the codec would encode it (snapshots: `encodedSize`; SWIM and Scuttlebutt: their exact codecs; src/sim/message-size.ts), divided by N and by the simulated seconds. *Whole run*: all of it, from the start (formation) to the end (the drain after the last arrival, when little changes); *steady state after formation*: the bytes sent from the first 250 ms bucket after every live node saw every other live node live (membership formed) to the end of the arrivals (to the end of the run when formation outlasts the arrivals), over that window. *Gossip* = snapshots + heartbeats (full) or SWIM + Scuttlebutt (scuttlebutt); *membership only* = heartbeats (full) or SWIM messages (scuttlebutt). Forwards and answers are not gossip.",
    "- **CPU per node per simulated second**: the process's user + system CPU time during the run ÷ N ÷ simulated seconds. It includes the simulator's own work (event queue, simulated engines) and the garbage collector, so it bounds a node's share from above.",
    `- **Memory per node**: (live JS heap + ArrayBuffer memory read by the probe at 90% of the arrival window − the same just before the run) ÷ N${o.gcForced ? ", each read after forced full GCs repeated until the reading stops falling (one left the previous run's garbage in the baseline)" : " (no GC could be forced: garbage included)"}. It counts everything the simulation holds for the cluster (nodes, trees, estimates, simulated engines, messages in flight, the event queue), so it is an upper bound on one node's state, not a process RSS.`,
    `- **Spread of a change**: a read-only probe (src/sim/probe.ts, every 20 ms of virtual time) takes 5 owners in turn, waits for each one's tree version to move, then counts the other live nodes whose estimate holds that (epoch, version) or later; the table gives the median over the 5 changes of the time to reach 50 / 99 / 100 % (resolution 20 ms), and that time in Δpoll rounds. "Scuttlebutt alone" (src/sim/gossip-rounds.ts) counts rounds directly, without timing, and reaches N the node simulator cannot.`,
    `- **Detection**: full mode — the probe reads every member's view of the crashed node every ${DETECT_EVERY_MS} ms (first and last to see it suspected, i.e. no longer routed to). Scuttlebutt mode — SWIM alone (src/sim/membership-sim.ts, the node's own Swim code, every status change recorded exactly): first suspicion, first and last member to declare it dead, crashed 20 s + 60 ms × N after the start (formation, then a 10 s steady window: *steady* bytes are that window's; *formation* is everything sent before it).`,
    `- **False suspicions**: SWIM alone — every suspect declaration about a member that was alive, by any member, over the whole run (formation included), with no loss and with ${LOSS * 100}% loss. Node simulator — (observer, member) episodes of a live member seen suspected or down, sampled every Δpoll (both modes; at ${LOSS * 100}% loss in the loss runs).`,
    `- **Hit rate**: actual hit tokens ÷ prompt tokens; the oracle = the same cluster (full mode) with every estimate refreshed the instant its owner changes (simulation only); the ideal = one cache holding every earlier prompt (routing cannot beat it). *After formation*: the same over the requests that arrived once the three runs at that N (full, scuttlebutt, oracle) had each formed — in 99% of the (live node, other live node) pairs the node saw the other live and held its estimate (read every ${DETECT_EVERY_MS} ms; arrivals in ${HIT_BUCKET_MS} ms buckets) — the steady state without the cluster's start-up.`,
    "",
  );
  // Table: node simulator.
  L.push("## Node simulator, per mode and N", "");
  L.push(
    "| mode | N | requests | gossip B/node/s | after formation | gossip msg/node/s | membership B/node/s | CPU ms/node/s | heap/node | hit | oracle hit | ideal | mean s | p99 s | CPU s | wall s |",
  );
  L.push("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const mode of MODES)
    for (const n of o.nodes) {
      const c = cell(o, "main", mode, n);
      const or = cell(o, "oracle", "full", n);
      if (!c) {
        L.push(
          `| ${mode} | ${n} | not run: ${skipReason(o, "main", mode, n) ?? "—"} |  |  |  |  |  |  |  |  |  |  |  |  |  |`,
        );
        continue;
      }
      L.push(
        `| ${mode} | ${n} | ${c.requests} | ${f(c.gossipBytesPerNodeS, 0)} | ${f(c.steady?.gossipBytesPerNodeS, 0)} | ${f(c.gossipMsgsPerNodeS, 1)} | ${f(c.membershipBytesPerNodeS, 0)} | ${f(c.cpuMsPerNodeS, 2)} | ${c.heapPerNodeBytes === undefined ? "—" : `${f(c.heapPerNodeBytes / 1e6, 2)} MB`} | ${pct(c.hit)} | ${or ? pct(or.hit) : "—"} | ${pct(c.ideal)} | ${f(c.meanS, 3)} | ${f(c.p99S, 3)} | ${f(c.cpuMs / 1000, 1)} | ${f(c.wallMs / 1000, 1)} |`,
      );
    }
  for (const n of o.nodes) {
    const c = cell(o, "bounded", "scuttlebutt", n);
    const or = cell(o, "oracle", "full", n);
    if (c)
      L.push(
        `| scuttlebutt, --max-estimates ${o.boundedEstimates} | ${n} | ${c.requests} | ${f(c.gossipBytesPerNodeS, 0)} | ${f(c.steady?.gossipBytesPerNodeS, 0)} | ${f(c.gossipMsgsPerNodeS, 1)} | ${f(c.membershipBytesPerNodeS, 0)} | ${f(c.cpuMsPerNodeS, 2)} | ${c.heapPerNodeBytes === undefined ? "—" : `${f(c.heapPerNodeBytes / 1e6, 2)} MB`} | ${pct(c.hit)} | ${or ? pct(or.hit) : "—"} | ${pct(c.ideal)} | ${f(c.meanS, 3)} | ${f(c.p99S, 3)} | ${f(c.cpuMs / 1000, 1)} | ${f(c.wallMs / 1000, 1)} |`,
      );
  }
  const b = o.cells.filter((c) => c.kind === "bounded").at(-1);
  if (b)
    L.push(
      "",
      `Bounded memory: scuttlebutt at ${b.nodes} nodes with --max-estimates ${o.boundedEstimates}: heap/node ${f((b.heapPerNodeBytes ?? 0) / 1e6, 2)} MB, gossip ${f(b.gossipBytesPerNodeS, 0)} B/node/s, hit ${pct(b.hit)}, mean ${f(b.meanS, 3)} s, p99 ${f(b.p99S, 3)} s.`,
    );
  L.push("");
  // Table: spread.
  L.push("## Spread of one change", "");
  L.push("| mode | N | 50 % (s / rounds) | 99 % (s / rounds) | 100 % (s / rounds) | changes tracked |");
  L.push("|---|---|---|---|---|---|");
  for (const mode of MODES)
    for (const n of o.nodes) {
      const c = cell(o, "main", mode, n);
      if (!c) continue;
      const t = (k: "p50Ms" | "p99Ms" | "p100Ms") => {
        const v = spreadMs(c, k);
        return v === undefined ? "not within 10 s" : `${s(v)} / ${f(v / POLL_MS, 1)}`;
      };
      L.push(`| ${mode} | ${n} | ${t("p50Ms")} | ${t("p99Ms")} | ${t("p100Ms")} | ${c.spreads.length} |`);
    }
  for (const n of o.nodes) {
    const c = cell(o, "bounded", "scuttlebutt", n);
    if (!c) continue;
    const t = (k: "p50Ms" | "p99Ms" | "p100Ms") => {
      const v = spreadMs(c, k);
      return v === undefined ? "not within 10 s" : `${s(v)} / ${f(v / POLL_MS, 1)}`;
    };
    L.push(
      `| scuttlebutt, --max-estimates ${o.boundedEstimates} | ${n} | ${t("p50Ms")} | ${t("p99Ms")} | ${t("p100Ms")} | ${c.spreads.length} |`,
    );
  }
  // Formation: arrivals start with the cluster, so its first requests see members not yet routable.
  const formed = MODES.map((mode) => {
    const at = o.nodes.flatMap((n) => {
      const c = cell(o, "main", mode, n);
      return c ? [`${n}: ${s(c.formed99AtMs)} / ${s(c.formedAtMs)} s`] : [];
    });
    return `${mode} ${at.join(", ")}`;
  });
  L.push(
    "",
    `Formation: arrivals start with the cluster at 0 s; 99% / all of the (live node, other live node) pairs were routable (the node saw the other live and held its estimate; read every ${DETECT_EVERY_MS} ms) at ${formed.join("; ")}. Requests before then see fewer candidates, in both modes.`,
  );
  L.push(
    "",
    `Scuttlebutt alone, in rounds (every node one push-pull with 3 members per round; with --max-estimates, owners also push to their holders). Spread: rounds for one change to reach 50 / 99 / 100 % of the nodes holding that owner, the others quiet; busy: every owner changes once a round (2 requests/s × Δpoll ${POLL_MS} ms), and the share of held estimates then at their owner's version:`,
    "",
  );
  L.push(
    "| N | owners held | 50 % | 99 % | 100 % | 2·log2 N | bytes/node/round, one change | bytes/node/round, busy | held estimates current | CPU s | wall s |",
  );
  L.push("|---|---|---|---|---|---|---|---|---|---|---|");
  for (const r of o.rounds)
    L.push(
      `| ${r.nodes} | ${r.maxEstimates === undefined ? "all" : `≤ ${r.maxEstimates}`} | ${r.p50 ?? "—"} | ${r.p99 ?? "—"} | ${r.p100 ?? `> ${r.maxRounds}`} | ${f(2 * Math.log2(r.nodes), 0)} | ${f(r.bytesPerNodeRound, 0)} | ${f(r.busyBytesPerNodeRound, 0)} | ${pct(r.currentShare)} | ${f(r.cpuMs / 1000, 1)} | ${f(r.wallMs / 1000, 1)} |`,
    );
  L.push("");
  // Detection and suspicions.
  L.push("## Detection of a crashed node and false suspicions", "");
  L.push("Full mesh (node simulator; noticed = suspected after 3 silent Δpoll):", "");
  L.push(
    `| N | noticed by | first s | last s | false suspicions, 0% loss (sampled) | false suspicions, ${LOSS * 100}% loss (sampled) |`,
  );
  L.push("|---|---|---|---|---|---|");
  for (const n of o.nodes) {
    const c = cell(o, "main", "full", n);
    const l = cell(o, "loss", "full", n);
    const d = c?.detection;
    L.push(
      `| ${n} | ${d ? `${d.noticed}/${d.observers}` : "—"} | ${s(d?.firstMs)} | ${s(d?.lastMs)} | ${c ? c.falseSuspicions : `not run: ${skipReason(o, "main", "full", n)}`} | ${l ? l.falseSuspicions : `not run: ${skipReason(o, "loss", "full", n) ?? "—"}`} |`,
    );
  }
  L.push("", "Scuttlebutt mode's membership (SWIM + Lifeguard alone):", "");
  L.push(
    "| N | loss | formation s | formation kB/node | steady B/node/s | push-pull B/node/s | SWIM B/node/s from steady to end | SWIM msg/node/s | first suspect s | first dead s | last dead s | declared dead | bound s | false suspicions (members) | live members declared dead | node-sim false suspicions (sampled) | CPU s | wall s |",
  );
  L.push("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const m of o.membership) {
    const nc = cell(o, m.loss === 0 ? "main" : "loss", "scuttlebutt", m.nodes);
    L.push(
      `| ${m.nodes} | ${m.loss * 100}% | ${s(m.formationMs)} | ${f(m.formationBytesPerNode / 1000, 1)} | ${f(m.steadyBytesPerNodeS, 1)} | ${f(m.pushPullBytesPerNodeS, 1)} | ${f(m.bytesPerNodeS, 0)} | ${f(m.msgsPerNodeS, 1)} | ${s(m.firstSuspectMs)} | ${s(m.firstDeadMs)} | ${s(m.lastDeadMs)} | ${m.declaredDead}/${m.observers} | ${s(m.boundMs)} | ${m.falseSuspicions} (${m.falselySuspectedMembers}) | ${m.falseDeaths} | ${nc ? nc.falseSuspicions : "not run"} | ${f(m.cpuMs / 1000, 1)} | ${f(m.wallMs / 1000, 1)} |`,
    );
  }
  L.push("");
  L.push("## Runs not started (infeasible here)", "");
  if (o.skipped.length === 0 && o.skippedAlone.length === 0) L.push("None: every run of the grid ran.");
  for (const k of o.skippedAlone) L.push(`- ${k}.`);
  for (const k of o.skipped)
    L.push(
      `- ${k.kind}${k.kind === "oracle" ? "" : ` ${k.mode}`}${k.loss ? ` at ${k.loss * 100}% loss` : ""}${k.maxEstimates ? ` --max-estimates ${k.maxEstimates}` : ""}, ${k.nodes} nodes: ${k.reason}.`,
    );
  L.push(
    "",
    `Budget per run: ${o.budgetS} s of CPU time — this process's user + system CPU during the run (runs go one at a time in one thread), not wall-clock time, so the same runs are started on a busy machine as on a quiet one — and ${o.heapBudgetMb} MB heap, each projected from the same series' last two measured N (growth exponent at least 1). The full mesh sends 2(N − 1) messages per node per Δpoll, so its cost per simulated second grows as N²; the oracle refreshes every peer's estimate of an owner on each change of it (N − 1 per change) and the one pair a real snapshot reached.`,
    "",
  );
  // Figures.
  const figs: [string, TopLevelSpec][] = [];
  const pts = (
    fn: (c: NodeCell) => number | undefined,
    kind: NodeCell["kind"],
    mode: string,
    label: string,
  ): SeriesPoint[] =>
    o.cells
      .filter((c) => c.kind === kind && c.mode === mode)
      .flatMap((c) => {
        const y = fn(c);
        return y === undefined || !(y > 0) ? [] : [{ series: label, nodes: c.nodes, y }];
      });
  figs.push([
    "bytes-vs-n",
    bytesVsN(
      [
        ...MODES.flatMap((m) => pts((c) => c.gossipBytesPerNodeS, "main", m, `${m}: all gossip`)),
        ...MODES.flatMap((m) => pts((c) => c.membershipBytesPerNodeS, "main", m, `${m}: membership only`)),
        ...pts(
          (c) => c.gossipBytesPerNodeS,
          "bounded",
          "scuttlebutt",
          `scuttlebutt, --max-estimates ${o.boundedEstimates}`,
        ),
        ...o.membership
          .filter((m) => m.loss === 0)
          .map((m) => ({ series: "SWIM alone, steady state", nodes: m.nodes, y: m.steadyBytesPerNodeS })),
      ],
      o.nodes,
    ),
  ]);
  figs.push([
    "convergence-vs-n",
    convergenceVsN(
      [
        ...MODES.flatMap((m) =>
          pts(
            (c) => {
              const v = spreadMs(c, "p100Ms");
              return v === undefined ? undefined : Math.max(v, 20) / 1000;
            },
            "main",
            m,
            `${m}: 100 % (node simulator)`,
          ),
        ),
        ...MODES.flatMap((m) =>
          pts(
            (c) => {
              const v = spreadMs(c, "p50Ms");
              return v === undefined ? undefined : Math.max(v, 20) / 1000;
            },
            "main",
            m,
            `${m}: 50 % (node simulator)`,
          ),
        ),
        ...o.rounds.flatMap((r) =>
          r.p100 === undefined
            ? []
            : [
                {
                  series: "Scuttlebutt alone: 100 % (rounds × Δpoll)",
                  nodes: r.nodes,
                  y: (r.p100 * POLL_MS) / 1000,
                },
              ],
        ),
      ],
      o.nodes,
    ),
  ]);
  figs.push([
    "detection-vs-n",
    detectionVsN(
      [
        ...pts(
          (c) => (c.detection?.firstMs === undefined ? undefined : Math.max(c.detection.firstMs, 1) / 1000),
          "main",
          "full",
          "full: first to suspect",
        ),
        ...pts(
          (c) => (c.detection?.lastMs === undefined ? undefined : c.detection.lastMs / 1000),
          "main",
          "full",
          "full: last to suspect",
        ),
        ...o.membership
          .filter((m) => m.loss === 0 && m.firstDeadMs !== undefined)
          .map((m) => ({ series: "SWIM: first dead", nodes: m.nodes, y: (m.firstDeadMs as number) / 1000 })),
        ...o.membership
          .filter((m) => m.loss === 0 && m.lastDeadMs !== undefined)
          .map((m) => ({ series: "SWIM: last dead", nodes: m.nodes, y: (m.lastDeadMs as number) / 1000 })),
        ...o.membership
          .filter((m) => m.loss === 0)
          .map((m) => ({ series: "memberlist bound", nodes: m.nodes, y: m.boundMs / 1000 })),
      ],
      o.nodes,
    ),
  ]);
  figs.push([
    "hit-vs-n",
    hitVsN(
      [
        ...MODES.flatMap((m) => pts((c) => c.hit, "main", m, m)),
        ...pts((c) => c.hit, "oracle", "full", "oracle (full mesh)"),
        ...pts((c) => c.ideal, "main", "scuttlebutt", "ideal bound"),
      ],
      o.nodes,
    ),
  ]);
  L.push("## Figures", "");
  for (const [name, spec] of figs) {
    const r = await renderVegaLite(spec);
    await writeFile(join(dir, `${name}.svg`), r.svg);
    await writeFile(join(dir, `${name}.png`), r.png);
    L.push(`![${name}](${name}.svg)`, "");
  }
  await writeFile(join(dir, "report.md"), `${L.join("\n")}\n`);
  await writeFile(join(dir, "results.json"), `${JSON.stringify({ context: ctx, ...o }, null, 1)}\n`);
}
