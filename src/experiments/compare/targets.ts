/**
 * The comparison's targets (issue 17) checked against the measured runs: one table per target with
 * each cell's verdict, met or not.
 */
import { conflictSection } from "./conflict.js";
import type { CompareResult } from "./execute.js";
import { ADMISSION_WAIT_MS, COMPARED, type CompareRun, DAEMON_ROW, OVERLOAD, SLOW_FACTOR } from "./grid.js";
import { pct, type Row, resultOf, s3 } from "./rows.js";

const mark = (ok: boolean) => (ok ? "met" : "**not met**");

/** A target's overall verdict: over no cell at all (a `--cells` subset without its runs) none is given. */
const overall = (ok: boolean, checked: number) =>
  checked === 0 ? "**not measured** (no cell here has every run the target compares)" : mark(ok);

/** A run's cell: its id without the policy. */
const cellKey = (r: CompareRun) => r.id.replace(`-${r.policy}-`, "-*-");

/** Cells: runs grouped by everything but the policy. */
function cells(rows: Row[]): Row[][] {
  const by = new Map<string, Row[]>();
  for (const r of rows) {
    const k = cellKey(r.run);
    const list = by.get(k);
    if (list) list.push(r);
    else by.set(k, [r]);
  }
  return [...by.values()];
}

function cellLabel(r: CompareRun): string {
  const parts = [
    `${r.nodes} nodes`,
    `Δcomm ${r.commMs} ms`,
    r.memory === "paper" ? "paper memory" : "constrained cache",
  ];
  if (r.hetero) parts.push(`node 0 ${SLOW_FACTOR}× slower`);
  parts.push(r.load === undefined ? "closed loop" : `open loop ${Math.round(r.load * 100)}%`);
  return parts.join(", ");
}

/** Target 1's ratios of one cell's runs: cost-aware and the daemon row ÷ best of local/affinity, ÷ oracle. */
function t1Ratios(cell: readonly Row[]): number[] | undefined {
  const g = (p: string) => resultOf(cell, p);
  const [ca, lo, af, or, da] = [g("cost-aware"), g("local"), g("affinity"), g("oracle"), g(DAEMON_ROW)];
  if (!ca || !lo || !af || !or || !da) return undefined;
  const best = Math.min(lo.meanS, af.meanS);
  return [ca.meanS / best, ca.meanS / or.meanS, da.meanS / best, da.meanS / or.meanS];
}

/** Each of target 1's ratios over the seeds ("min–max"), and how many seeds meet the bound alone. */
function t1Spread(cell: readonly Row[], seedRows: readonly Row[][]): { range: string[]; met: number[] } {
  const k = cellKey(cell[0]!.run);
  const per = seedRows.flatMap((rows) => {
    const r = t1Ratios(rows.filter((x) => cellKey(x.run) === k));
    return r ? [r] : [];
  });
  const range = [0, 1, 2, 3].map((i) => {
    const xs = per.map((r) => r[i] as number);
    return `${Math.min(...xs).toFixed(3)}–${Math.max(...xs).toFixed(3)}`;
  });
  const met = [0, 2].map(
    (i) => per.filter((r) => (r[i] as number) <= 1.02 && (r[i + 1] as number) <= 1.02).length,
  );
  return { range, met };
}

export function targets(rows: Row[], seedRows: Row[][], seedIds: readonly number[]): string[] {
  const out: string[] = [];
  const closedCells = cells(rows.filter((r) => r.run.load === undefined));
  const many = seedRows.length > 1;
  out.push(
    "### Target 1: `cost-aware` mean ≤ 1.02 × min(local, affinity) and ≤ 1.02 × the oracle's, every closed-loop cell",
    "",
    `Checked for \`cost-aware\` (the paper's node) and for \`${DAEMON_ROW}\` (the same policy as the daemon configures it).`,
    many
      ? `Over ${seedRows.length} seeds: every latency is the mean over the seeds of that run's mean latency; each ratio is the ratio of those means, with the smallest and largest of the same ratio taken seed by seed beside it (min–max). **Verdict: met when both ratios of the means are ≤ 1.02**; "k/${seedRows.length}" says how many seeds meet the bound on their own.`
      : "",
    "",
  );
  out.push(
    `| cell | cost-aware | local | affinity | oracle | ÷ best of local/affinity | ÷ oracle | verdict | ${DAEMON_ROW} | ÷ best | ÷ oracle | verdict |`,
  );
  out.push("|---|---|---|---|---|---|---|---|---|---|---|---|");
  let all1 = true;
  let all1d = true;
  let n1 = 0;
  for (const cell of closedCells) {
    const g = (p: string) => resultOf(cell, p);
    const ca = g("cost-aware");
    const lo = g("local");
    const af = g("affinity");
    const or = g("oracle");
    const da = g(DAEMON_ROW);
    if (!ca || !lo || !af || !or || !da) continue;
    const best = Math.min(lo.meanS, af.meanS);
    const ok = ca.meanS <= 1.02 * best && ca.meanS <= 1.02 * or.meanS;
    const okd = da.meanS <= 1.02 * best && da.meanS <= 1.02 * or.meanS;
    all1 &&= ok;
    all1d &&= okd;
    n1++;
    const sp = many ? t1Spread(cell, seedRows) : undefined;
    const ratio = (x: number, i: number) => `${x.toFixed(3)}${sp ? ` (${sp.range[i]})` : ""}`;
    const seedsMet = (i: number) => (sp ? `, ${sp.met[i]}/${seedRows.length}` : "");
    out.push(
      `| ${cellLabel(cell[0]!.run)} | ${s3(ca.meanS)} | ${s3(lo.meanS)} | ${s3(af.meanS)} | ${s3(or.meanS)} | ${ratio(ca.meanS / best, 0)} | ${ratio(ca.meanS / or.meanS, 1)} | ${mark(ok)}${seedsMet(0)} | ${s3(da.meanS)} | ${ratio(da.meanS / best, 2)} | ${ratio(da.meanS / or.meanS, 3)} | ${mark(okd)}${seedsMet(1)} |`,
    );
  }
  out.push("", `Overall: cost-aware ${overall(all1, n1)}; ${DAEMON_ROW} ${overall(all1d, n1)}.`, "");

  out.push(
    "### Target 2: `cost-aware` actual hit rate ≥ 0.95 × `centralized`'s in every cell; hotspot ≤ 40%",
    "",
  );
  out.push(
    `| cell | cost-aware hit | centralized hit | ratio | cost-aware hotspot | verdict | ${DAEMON_ROW} hit | ratio | hotspot | verdict |`,
  );
  out.push("|---|---|---|---|---|---|---|---|---|---|");
  let all2 = true;
  let all2d = true;
  let n2 = 0;
  for (const cell of cells(rows)) {
    const ca = cell.find((r) => r.run.policy === "cost-aware")?.result;
    const ce = cell.find((r) => r.run.policy === "centralized")?.result;
    const da = cell.find((r) => r.run.policy === DAEMON_ROW)?.result;
    if (!ca || !ce || !da) continue;
    const ratioOf = (x: CompareResult) => (ce.actualHit === 0 ? 1 : x.actualHit / ce.actualHit);
    const ok = ratioOf(ca) >= 0.95 && ca.hotspotShare <= 0.4;
    const okd = ratioOf(da) >= 0.95 && da.hotspotShare <= 0.4;
    all2 &&= ok;
    all2d &&= okd;
    n2++;
    out.push(
      `| ${cellLabel(cell[0]!.run)} | ${pct(ca.actualHit)} | ${pct(ce.actualHit)} | ${ratioOf(ca).toFixed(3)} | ${pct(ca.hotspotShare)} | ${mark(ok)} | ${pct(da.actualHit)} | ${ratioOf(da).toFixed(3)} | ${pct(da.hotspotShare)} | ${mark(okd)} |`,
    );
  }
  out.push("", `Overall: cost-aware ${overall(all2, n2)}; ${DAEMON_ROW} ${overall(all2d, n2)}.`, "");
  out.push(...conflictSection(closedCells, cellLabel));

  out.push(
    "### Target 3: open loop at 80%: `cost-aware` p99 ≤ 0.5 × local's and ≤ centralized's; at 120% refusals reported and no admitted request waits past the bound",
    "",
  );
  out.push(
    `| cell | cost-aware p99 | local p99 | centralized p99 | ÷ local | ÷ centralized | verdict | ${DAEMON_ROW} p99 | ÷ local | ÷ centralized | verdict |`,
  );
  out.push("|---|---|---|---|---|---|---|---|---|---|---|");
  let all3 = true;
  let all3d = true;
  let n3 = 0;
  for (const cell of cells(rows.filter((r) => r.run.load === 0.8))) {
    const g = (p: string) => resultOf(cell, p);
    const ca = g("cost-aware");
    const lo = g("local");
    const ce = g("centralized");
    const da = g(DAEMON_ROW);
    if (!ca || !lo || !ce || !da) continue;
    const ok = ca.p99S <= 0.5 * lo.p99S && ca.p99S <= ce.p99S;
    const okd = da.p99S <= 0.5 * lo.p99S && da.p99S <= ce.p99S;
    all3 &&= ok;
    all3d &&= okd;
    n3++;
    out.push(
      `| ${cellLabel(cell[0]!.run)} | ${s3(ca.p99S)} | ${s3(lo.p99S)} | ${s3(ce.p99S)} | ${(ca.p99S / lo.p99S).toFixed(3)} | ${(ca.p99S / ce.p99S).toFixed(3)} | ${mark(ok)} | ${s3(da.p99S)} | ${(da.p99S / lo.p99S).toFixed(3)} | ${(da.p99S / ce.p99S).toFixed(3)} | ${mark(okd)} |`,
    );
  }
  out.push("", `Overall: cost-aware ${overall(all3, n3)}; ${DAEMON_ROW} ${overall(all3d, n3)}.`, "");
  // How far routing alone can go: the oracle routes with perfect estimates but moves nothing queued.
  const bound = cells(rows.filter((r) => r.run.load === 0.8)).flatMap((cell) => {
    const or = cell.find((r) => r.run.policy === "oracle")?.result;
    const lo = cell.find((r) => r.run.policy === "local")?.result;
    return or && lo ? [`${cellLabel(cell[0]!.run)}: ${(or.p99S / lo.p99S).toFixed(3)}`] : [];
  });
  const boundText = bound.length > 0 ? bound.join("; ") : "not measured (no such cell here)";
  out.push(
    `The oracle's p99 ÷ local's at 80% (routing with perfect estimates, nothing queued ever moved): ${boundText}.`,
    "",
  );
  out.push(
    "At 120% of capacity, refused requests (an error to the client after its retries) per policy:",
    "",
  );
  out.push(`| cell | ${COMPARED.join(" | ")} |`, `|---|${COMPARED.map(() => "---").join("|")}|`);
  for (const cell of cells(rows.filter((r) => r.run.load === OVERLOAD))) {
    const vals = COMPARED.map((p) => {
      const r = cell.find((x) => x.run.policy === p)?.result;
      // A mean over seeds need not be whole.
      const n = Number.isInteger(r?.refused) ? String(r?.refused) : r?.refused.toFixed(1);
      return r ? `${n} (${pct(r.refused / r.requests)})` : "—";
    });
    out.push(`| ${cellLabel(cell[0]!.run)} | ${vals.join(" | ")} |`);
  }
  out.push(
    "",
    `At ${Math.round(OVERLOAD * 100)}% of capacity the ${DAEMON_ROW} row runs with admission by expected wait on`,
    `(\`maxWaitMs\` ${ADMISSION_WAIT_MS} ms; every other row, and that row at lower loads, as the defaults: off,`,
    "requests queue up to each node's `maxQueue`, 1024). A refused client retries after the",
    "Retry-After it was given (up to its try limit): refused once = requests refused at least once;",
    "refused = still refused after every retry. Wait = admission (the entry node taking the try that",
    `was answered) to the start of its engine run (queues, forwards, fallbacks; not the answer's way back), over the requests answered${many ? " (one row per seed: the bound holds for every request of every seed)" : ""}:`,
    "",
    "| cell | refused once | refused | wait p99 s | wait max s | waited past the bound | verdict |",
    "|---|---|---|---|---|---|---|",
  );
  let all3w = true;
  let n3w = 0;
  const seedOf = new Map(seedRows.map((rs, i) => [rs, seedIds[i]]));
  for (const rs of seedRows)
    for (const cell of cells(rs.filter((r) => r.run.load === OVERLOAD))) {
      const d = cell.find((r) => r.run.policy === DAEMON_ROW);
      const a = d?.result.admitted;
      if (!d || !a || d.run.maxWaitMs === undefined) continue;
      const ok = a.overBound === 0;
      all3w &&= ok;
      n3w++;
      out.push(
        `| ${cellLabel(d.run)}${many ? `, seed ${seedOf.get(rs)}` : ""} | ${a.refusedOnce} (${pct(a.refusedOnce / d.result.requests)}) | ${d.result.refused} (${pct(d.result.refused / d.result.requests)}) | ${s3(a.waitP99S)} | ${s3(a.waitMaxS)} | ${a.overBound} (${pct(a.overBound / Math.max(1, d.result.answered))}) | ${mark(ok)} |`,
      );
    }
  out.push(
    "",
    `Overall (no admitted request waits past ${ADMISSION_WAIT_MS} ms): ${DAEMON_ROW} ${overall(all3w, n3w)}.`,
    "",
    "### Target 4: real cluster (`prefixmesh bench --compare-policies`)",
    "",
    "**Not run** by this command (simulator only).",
    "",
  );
  return out;
}
