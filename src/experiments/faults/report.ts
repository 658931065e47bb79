/**
 * The fault report: report.md (the invariants, issue 18's simulator targets with measured values
 * beside them, met or not; every class closed and open loop beside the fault-free run), results.json
 * and a figure of p99 per class.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { TopLevelSpec } from "vega-lite";
import { type DAEMON_NODE_DEFAULTS, nodeConfigSchema } from "../../core/node/config.js";
import { DEFAULT_PROFILE } from "../../engines/sim/profiles.js";
import { makeDir } from "../../net/make-dir.js";
import { renderVegaLite } from "../render.js";
import { BAD_PEER, INVESTIGATIONS, MEASURED_REQUESTS, SLOW_NODE, SPOT_CHECK_RATE } from "./classes.js";
import { type FaultRunResult, type Loop, WARMUP_SHARE } from "./measure.js";
import { allQueueWaits, lossCause, lossRow } from "./report-loss.js";
import { COMM_MS, type FaultsOutcome, JITTER_MS, NODES, POLL_MS } from "./run.js";

export interface ReportContext {
  command: string;
  /** 1-minute load average before and after the run (the machine is shared). */
  loadBefore: number;
  loadAfter: number;
  cores: number;
}

/** The daemon defaults the run started from (results.json), not today's: the report is its data's. */
const ran = (o: FaultsOutcome) => o.daemonDefaults as typeof DAEMON_NODE_DEFAULTS;
const s3 = (x: number) => x.toFixed(3);
const s1 = (x: number) => x.toFixed(1);
const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const mark = (ok: boolean) => (ok ? "met" : "**not met**");

const TRUST_FAILURES = nodeConfigSchema.shape.trustFailures.def.defaultValue as number;
const TRUST_WINDOW_MS = nodeConfigSchema.shape.trustWindowMs.def.defaultValue as number;

/** The probation window the run's nodes had (trustMaxUnanswered; 0: none, as before it existed). */
function probation(o: FaultsOutcome): number {
  const d = o.daemonDefaults as { trustMaxUnanswered?: unknown };
  return typeof d.trustMaxUnanswered === "number" ? d.trustMaxUnanswered : 0;
}

function get(o: FaultsOutcome, classId: string, loop: Loop): FaultRunResult | undefined {
  return o.runs.find((r) => r.classId === classId && r.loop === loop);
}

function must(o: FaultsOutcome, classId: string, loop: Loop): FaultRunResult {
  const r = get(o, classId, loop);
  if (!r) throw new Error(`fault report: no ${classId} run in the ${loop} loop`);
  return r;
}

const isInvestigation = (r: FaultRunResult) => INVESTIGATIONS.some((i) => i.id === r.classId);

/** Every run of the shipped configuration (no investigation re-runs). */
function shipped(o: FaultsOutcome): FaultRunResult[] {
  return o.runs.filter((r) => !isInvestigation(r));
}

function invariants(o: FaultsOutcome): string[] {
  const runs = shipped(o);
  const lost = runs.reduce((a, r) => a + r.lost, 0);
  const dup = runs.reduce((a, r) => a + r.duplicated, 0);
  const wrongElsewhere = runs.filter((r) => r.classId !== "lying-peer" && r.wrong > 0);
  const liars = runs.filter((r) => r.classId === "lying-peer");
  return [
    "## Invariants",
    "",
    "| invariant | measured over every run of the shipped configuration | verdict |",
    "|---|---|---|",
    `| lost = 0 (every request answered) | ${lost} lost of ${runs.reduce((a, r) => a + r.requests, 0)} requests in ${runs.length} runs | ${mark(lost === 0)} |`,
    `| duplicated = 0 (no client answered twice) | ${dup} | ${mark(dup === 0)} |`,
    `| wrong = 0 except the lying peer's | ${wrongElsewhere.length === 0 ? "0 outside the lying-peer class" : wrongElsewhere.map((r) => `${r.id}: ${r.wrong}`).join(", ")}; lying peer: ${liars.map((r) => `${r.wrong} (${r.loop} loop)`).join(", ")} wrong answers delivered before every origin quarantined it | ${mark(wrongElsewhere.length === 0)} (the liar's are counted, not hidden) |`,
    "",
  ];
}

function targets(o: FaultsOutcome): string[] {
  const out = ["## Targets (issue 18) the simulator can measure", ""];
  out.push("| target | measured | verdict |", "|---|---|---|");
  // Stalling peer: demotion.
  const demotion = (["closed", "open"] as const).map((loop) => {
    const r = must(o, "stalling-peer", loop);
    const worst = Math.max(...(r.trust ?? []).map((t) => t.beforeFirstOpen));
    const opened = (r.trust ?? []).every((t) => t.opened > 0);
    return { loop, r, worst, opened };
  });
  out.push(
    `| Stalling peer demoted after ≤ 3 unanswered forwards | ${demotion
      .map(
        (d) =>
          `${d.loop} loop: failed forwards before each origin's breaker first opened ${(d.r.trust ?? []).map((t) => `n${t.origin} ${t.beforeFirstOpen}`).join(", ")} (breaker opened at every origin: ${d.opened ? "yes" : "no"})`,
      )
      .join("; ")} | ${mark(demotion.every((d) => d.opened && d.worst <= 3))} |`,
  );
  const stallC = must(o, "stalling-peer", "closed");
  const without = must(o, "fault-free-3", "closed");
  const ratio = stallC.throughput / without.throughput;
  out.push(
    `| Stalling peer: cluster throughput within 20% of the same cluster without it | closed loop: ${s3(stallC.throughput)} req/s vs ${s3(without.throughput)} req/s on 3 nodes (${pct(ratio - 1)}) | ${mark(ratio >= 0.8)} |`,
  );
  const refusal = (["closed", "open"] as const).map((loop) => {
    const r = must(o, "refusing-peer", loop);
    const f = r.refusal ?? { afterDemotion: 0, afterDemotionFellBack: 0 };
    const share = f.afterDemotion === 0 ? 0 : f.afterDemotionFellBack / f.afterDemotion;
    return { loop, r, f, share };
  });
  out.push(
    `| Refusing peer: < 5% of requests fall back once it is demoted | ${refusal
      .map(
        (x) =>
          `${x.loop} loop: ${x.f.afterDemotionFellBack} of ${x.f.afterDemotion} (${pct(x.share)}) after demotion; whole run ${x.r.fellBack} of ${x.r.requests} (${pct(x.r.fellBack / x.r.requests)})`,
      )
      .join("; ")} | ${mark(refusal.every((x) => x.f.afterDemotion > 0 && x.share < 0.05))} |`,
  );
  const lies = (["closed", "open"] as const).map((loop) => {
    const r = must(o, "lying-peer", loop);
    const l = r.liar ?? { servedForOthers: 0, lastWrongAt: 0, quarantinedBy: 0, origins: 0 };
    return { loop, r, l };
  });
  out.push(
    `| Wrong-answer peer quarantined within 200 forwarded deterministic requests at a 5% check rate | ${lies
      .map(
        (x) =>
          `${x.loop} loop: its last wrong answer was forward no. ${x.l.lastWrongAt} it served another origin (${x.l.servedForOthers} in all); quarantined by ${x.l.quarantinedBy} of ${x.l.origins} origins; ${x.r.spotChecks} checks, ${x.r.spotCheckMismatches} mismatches`,
      )
      .join(
        "; ",
      )} | ${mark(lies.every((x) => x.l.lastWrongAt <= 200 && x.l.quarantinedBy === x.l.origins))} |`,
  );
  const ffOpen = must(o, "fault-free", "open");
  const ub = must(o, "unbounded", "open");
  const u = ub.unbounded;
  if (u) {
    out.push(
      `| One unbounded request: other requests entering that node keep p99 ≤ 2× the fault-free p99 | open loop: requests entering n${u.entry} while it ran (${u.window.requests}, ${s1(u.startS)}–${s1(u.endS)} s): p99 ${s3(u.window.p99S)} s vs fault-free p99 ${s3(ffOpen.p99S)} s (${(u.window.p99S / ffOpen.p99S).toFixed(2)}×; the same window's requests in the fault-free run: p99 ${s3(u.faultFreeWindow?.p99S ?? 0)} s); n${u.entry}'s whole run: p99 ${s3(u.nodeP99S)} s. Closed loop: one request in flight, nothing else enters while it runs | ${mark(u.window.p99S <= 2 * ffOpen.p99S)} |`,
    );
  }
  const slow = must(o, "slow-10x", "open");
  out.push(
    `| One node 10× slower, open loop ${o.openRate} req/s: p99 ≤ 2× the fault-free p99 | p99 ${s3(slow.p99S)} s vs ${s3(ffOpen.p99S)} s (${(slow.p99S / ffOpen.p99S).toFixed(2)}×)${slow.afterWarmup && ffOpen.afterWarmup ? `; ${warm(ffOpen.afterWarmup)}: p99 ${s3(slow.afterWarmup.p99S)} s vs ${s3(ffOpen.afterWarmup.p99S)} s (${(slow.afterWarmup.p99S / ffOpen.afterWarmup.p99S).toFixed(2)}×)` : ""} | ${mark(slow.p99S <= 2 * ffOpen.p99S)}${slow.p99S > 2 * ffOpen.p99S && slow.afterWarmup && ffOpen.afterWarmup && slow.afterWarmup.p99S <= 2 * ffOpen.afterWarmup.p99S ? " (met after the warm-up)" : ""} |`,
  );
  out.push(lossRow(o));
  out.push(
    "",
    "Not measured here (real processes, not the simulator): slow-loris sockets, 2× overload with",
    "`Retry-After`, forged and replayed HMAC, the oversized snapshot's `/health` p99.",
    "",
  );
  return out;
}

const list = (xs: number[]) => xs.map(s1).join(", ");

/** Names the after-warm-up slice of a run (the verdicts read the whole run). */
const warm = (w: { from: number }) =>
  `after the warm-up (requests from no. ${w.from}; every run starts with empty caches)`;

/** What these runs' records say about each target they miss (empty when every one is met). */
function causes(o: FaultsOutcome): string[] {
  const out: string[] = [];
  const ffOpen = must(o, "fault-free", "open");
  const stalls = (["closed", "open"] as const).map((loop) => must(o, "stalling-peer", loop));
  if (stalls.some((r) => (r.trust ?? []).some((t) => t.beforeFirstOpen > 3))) {
    const window = probation(o);
    out.push(
      `- **Stalling peer, demotion.** A forward to the staller counts as failed only once its answer is overdue: answerSlack (3) × the expected time it acked (its own queue) + 1 s; the breaker opens after ${TRUST_FAILURES} failures within ${TRUST_WINDOW_MS / 1000} s, or ${TRUST_FAILURES} in a row with no answer between them.${window > 0 ? ` A peer that has not yet answered an origin (since it started, or since the peer's breaker last opened) is sent at most ${window} of its forwards it has not answered, open or failed (trustMaxUnanswered): failures beyond ${window} before the first opening are forwards sent it while it was off probation, after it had answered that origin once.` : ""}`,
    );
    for (const r of stalls) {
      const f = r.failover;
      if (!f) continue;
      const first = f.firstByOrigin
        .map(
          (x) =>
            `n${x.origin} sent its first failed forwards at ${list(x.sentS)} s and waited ${list(x.waitedS)} s on each`,
        )
        .join("; ");
      out.push(
        `  ${r.loop} loop: ${f.count} forwards to it failed over, after a median ${s1(f.medianS)} s (max ${s1(f.maxS)} s); ${first}. ${r.loop === "open" && window === 0 ? "Origins keep forwarding to it while their first forwards wait out their deadlines (its advertised queue is long, so the deadline is too; past 30 s only the forward timeout applies), so more than 3 go unanswered before the first failure is even counted." : "Failures counted before demotion follow from the rule above."}`,
      );
    }
  }
  const ub = get(o, "unbounded", "open");
  const ubOff = get(o, "unbounded+offload", "open");
  if (ub?.unbounded && ub.unbounded.window.p99S > 2 * ffOpen.p99S) {
    const e = ub.byEntry[ub.unbounded.entry];
    const fe = ffOpen.byEntry[ub.unbounded.entry];
    out.push(
      `- **Unbounded request.** ${ran(o).offload ? "Offload is on in the daemon's configuration, yet" : "Offload is off in the daemon's configuration:"} its node n${ub.unbounded.entry} keeps its own clients' requests queued behind the ${s1(ub.unbounded.latencyS)} s generation (its clients' requests over the run: ${pct(e?.servedThere ?? 0)} served there, mean queue wait ${s1(e?.meanQueueS ?? 0)} s, fault-free ${s1(fe?.meanQueueS ?? 0)} s).${ubOff?.unbounded ? ` With offload on (below) the requests entering it during the generation have p99 ${s3(ubOff.unbounded.window.p99S)} s.` : ""} The daemon's own API never sends such a request: without max_tokens a chat request gets chatMaxTokensDefault (the \`unbounded-api\` class), and above maxTokensCeiling it is refused.`,
    );
  }
  const slow = get(o, "slow-10x", "open");
  const slowOff = get(o, "slow-10x+offload", "open");
  if (slow && slow.p99S > 2 * ffOpen.p99S) {
    const e = slow.byEntry[1];
    // Whether n1's own clients are the tail (it keeps them queued) or fare like the others'.
    const others = slow.byEntry.filter((x) => x.entry !== 1).map((x) => x.p99S);
    const slowClientsWorst = (e?.p99S ?? 0) > 1.5 * Math.max(0, ...others);
    out.push(
      `- **One node 10× slower.** n1 serves a tenth of a node's rate but keeps ${pct(e?.servedThere ?? 0)} of its own clients' requests (mean queue wait ${s1(e?.meanQueueS ?? 0)} s, p99 ${s1(e?.p99S ?? 0)} s; the other nodes' clients: p99 ${slow.byEntry
        .filter((x) => x.entry !== 1)
        .map((x) => s1(x.p99S))
        .join(
          ", ",
        )} s): ${ran(o).offload ? (slowClientsWorst ? "cost-aware ranking never counts a peer's wait shorter than its own (policies/cost-aware.ts), so new requests keep entering its queue, and offload moves them out only at each Δpoll tick, only to a peer expected to finish sooner by a service time (from its queue as last reported): its clients' slowest requests wait behind a 10× slower run." : `every node knows each other's speed (the engine costs each advertises ride in its gossiped state), with offload on cost-aware's wait floor is bounded and queues compare in each node's own jobs, so n1 forwards its clients' requests and its clients fare like the others'. What is left is capacity: the slowest requests are the cold start's (every cache empty) carried by three fast nodes, and the same cluster with no fourth node at all (fault-free, 3 nodes) has p99 ${s3(get(o, "fault-free-3", "open")?.p99S ?? 0)} s.`) : "its queue grows for the whole run, since cost-aware ranking never counts a peer's wait shorter than its own (policies/cost-aware.ts) and, with offload off, nothing moves work already queued."}${slowOff && !ran(o).offload ? ` With offload on (below): p99 ${s3(slowOff.p99S)} s (${(slowOff.p99S / ffOpen.p99S).toFixed(2)}×), n1's clients' mean queue wait ${s1(slowOff.byEntry[1]?.meanQueueS ?? 0)} s.` : ""}`,
    );
  }
  const loss = lossCause(o);
  if (loss !== undefined) out.push(loss);
  if (out.length === 0) return [];
  return ["## Why the missed targets are missed (from these runs' records)", "", ...out, ""];
}

function table(o: FaultsOutcome, loop: Loop): string[] {
  const ff = must(o, "fault-free", loop);
  const x = (v: number, base: number) => (base > 0 ? ` (${(v / base).toFixed(2)}×)` : "");
  const out = [
    "| class | requests | lost | duplicated | wrong | p50 s | p99 s | max s | fallbacks (requests) | retries | duplicate runs | throughput req/s | fault window s | converged after s |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of shipped(o).filter((y) => y.loop === loop)) {
    const label = o.setups.find((s) => s.classId === r.classId)?.label ?? r.classId;
    const window = r.classId.startsWith("fault-free")
      ? "—"
      : r.faultEndS === undefined
        ? "whole run"
        : `${s1(r.faultStartS)}–${s1(r.faultEndS)}`;
    const conv = r.convergeS === undefined ? "—" : s1(r.convergeS);
    const rel = r === ff;
    out.push(
      `| ${label} | ${r.requests} | ${r.lost} | ${r.duplicated} | ${r.wrong} | ${s3(r.p50S)}${rel ? "" : x(r.p50S, ff.p50S)} | ${s3(r.p99S)}${rel ? "" : x(r.p99S, ff.p99S)} | ${s3(r.maxS)}${rel ? "" : x(r.maxS, ff.maxS)} | ${r.fallbacks} (${r.fellBack}) | ${r.retries} | ${r.duplicateRuns} | ${s3(r.throughput)} | ${window} | ${conv} |`,
    );
  }
  return out;
}

function investigations(o: FaultsOutcome): string[] {
  const ff = must(o, "fault-free", "open");
  const out = [
    "## Investigation: the same faults with a setting the daemon leaves off (not the shipped configuration)",
    "",
    "| run | p50 s | p99 s (× fault-free) | max s | lost | duplicated | wrong | fallbacks | unbounded: window p99 s |",
    "|---|---|---|---|---|---|---|---|---|",
  ];
  for (const inv of INVESTIGATIONS) {
    const base = get(o, inv.base, "open");
    const r = get(o, inv.id, "open");
    for (const [name, x] of [
      [`${inv.base} (shipped)`, base],
      [inv.label, r],
    ] as const) {
      if (!x) continue;
      out.push(
        `| ${name} | ${s3(x.p50S)} | ${s3(x.p99S)} (${(x.p99S / ff.p99S).toFixed(2)}×) | ${s3(x.maxS)} | ${x.lost} | ${x.duplicated} | ${x.wrong} | ${x.fallbacks} | ${x.unbounded ? s3(x.unbounded.window.p99S) : "—"} |`,
      );
    }
  }
  out.push("");
  return out;
}

function figure(o: FaultsOutcome): TopLevelSpec {
  const values = shipped(o).map((r) => ({
    fault: o.setups.find((s) => s.classId === r.classId)?.label ?? r.classId,
    loop: `${r.loop} loop`,
    p99: Math.max(r.p99S, 1e-3),
  }));
  return {
    $schema: "https://vega.github.io/schema/vega-lite/v6.json",
    title: "p99 latency per fault class (daemon configuration, simulator)",
    data: { values },
    facet: { column: { field: "loop", type: "nominal", title: null } },
    spec: {
      width: 320,
      height: 300,
      // A dot per class: a log axis has no zero for bars to start from.
      mark: { type: "point", filled: true, size: 80 },
      encoding: {
        y: { field: "fault", type: "nominal", sort: null, title: null, axis: { labelLimit: 400 } },
        x: { field: "p99", type: "quantitative", scale: { type: "log" }, title: "p99 latency (s, log)" },
      },
    },
  } as TopLevelSpec;
}

/** What results.json holds: the outcome and the context it ran in (the report is made from it alone). */
export interface FaultsResults extends FaultsOutcome {
  context: ReportContext;
}

/** Writes report.md, results.json and the figure; returns report.md's path. */
export async function writeFaultsReport(
  o: FaultsOutcome,
  ctx: ReportContext,
  outDir: string,
): Promise<string> {
  await makeDir(outDir, 0o777, (m) => new Error(m));
  const fig = await renderVegaLite(figure(o));
  await writeFile(join(outDir, "p99-by-fault.svg"), fig.svg);
  await writeFile(join(outDir, "p99-by-fault.png"), fig.png);
  const results: FaultsResults = { ...o, context: ctx };
  await writeFile(join(outDir, "results.json"), `${JSON.stringify(results, null, 1)}\n`);
  const path = join(outDir, "report.md");
  await writeFile(path, faultsReportText(results));
  return path;
}

/** report.md's text, from results.json's content alone. */
export function faultsReportText(results: FaultsResults): string {
  const o = results;
  const ctx = results.context;
  const defaults = Object.entries(ran(o))
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
  const whats = [...new Map(o.setups.filter((s) => s.loop === "closed").map((s) => [s.classId, s])).values()];
  const md = [
    "# Fault report (simulator, the daemon's configuration)",
    "",
    `Generated by \`${ctx.command}\` in ${(o.wallMs / 1000).toFixed(0)} s wall on ${ctx.cores} cores (1-minute load average ${ctx.loadBefore.toFixed(1)} before, ${ctx.loadAfter.toFixed(1)} after: the machine is shared; every figure below is virtual time, which load does not change).`,
    o.synthetic ? "\n**SYNTHETIC workload** (no MMLU folder): MMLU-shaped, not MMLU.\n" : "",
    ...(o.requests < MEASURED_REQUESTS
      ? [
          `**A short run**: ${o.requests} requests per run, where the targets are read at ${MEASURED_REQUESTS} ` +
            "(`--quick` is a structural check): its verdicts are not the issue's measurement.\n",
        ]
      : []),
    "## Setup",
    "",
    `- ${NODES} nodes running the unchanged core node code in the simulator, as \`prefixmesh node\` configures them by default (DAEMON_NODE_DEFAULTS: ${defaults}; Δpoll ${POLL_MS} ms), Δcomm ${COMM_MS} ± ${JITTER_MS} ms, cost profile \`${DEFAULT_PROFILE}\` (fitted to the paper's measurements), seed ${o.seed}. ${ran(o).offload ? "Offload is on; admission" : "Offload, admission"} by expected wait (\`maxWaitMs\`) and spot checks are off in that configuration; spot checks are turned on (${100 * SPOT_CHECK_RATE}%) for the lying-peer class only, as its target asks.`,
    `- Workload: \`${o.workloadName}\`, ${o.requests} requests per run (mean prompt ${o.meanPromptTokens.toFixed(0)} tokens, 1 output token, temperature 0). Closed loop: one request in flight (the paper's loop). Open loop: Poisson arrivals at ${o.openRate} requests/s (the issue's rate), the same questions in the same order.`,
    "- Every class runs on the same seed and schedule as the fault-free run of its loop; its fault is placed at fractions of that run's virtual span T (below). A request's node is assigned round-robin; a client whose node crashed re-submits to the next live one (up to 4 tries).",
    "- lost = requests never answered; duplicated = client requests answered twice; wrong = answers delivered that are not the model's output (the simulated engine's output is deterministic, so every answer is checked); fallbacks = forward attempts that moved to another candidate (in brackets: client requests that fell back at least once); duplicate runs = engine runs beyond the first per request (work done twice).",
    ...(allQueueWaits(o)
      ? [
          "- **Queue waits**: a request's record counts the queue of the run that answered it (`queueMs`) and, apart, its other queue waits (`otherQueueMs`): at a peer whose forward attempt its origin gave up on, for as long as the origin still waited on that attempt, and in its origin's own queue before offload moved it or a peer's late answer took it out (overlaps counted once). Those would otherwise read as network time. The 30% loss target is read on the whole latency, as written, and its verdict is that reading; \"max without its queue waits\" (the latency less both) is a second reading beside it, not the target: what is left is the network's share (lost messages, ack timeouts, re-asks) and the runs' (the one that answered, and any at a peer its origin gave up on).",
        ]
      : []),
    "- **Converged after**: from the end of the fault to the end of the last request started after it that still fell back, was re-submitted, or took longer than any request of the fault-free run (0: none did). This is the client's view; that every estimate equals its owner's tree k × Δpoll after the faults end is asserted separately by test/sim/daemon-faults.test.ts. \"—\": the fault lasts the whole run.",
    ...(o.runs.some((r) => r.afterWarmup)
      ? [
          `- **After the warm-up**: the same figures over the requests after the first ${WARMUP_SHARE * 100}% of the run (by arrival). Every run starts with empty caches, so in the open loop every node computes the few-shot prefixes for the first time while arrivals keep coming, and that cold start, not the fault, can set the whole run's tail. The verdicts read the whole run.`,
        ]
      : []),
    `- Demotion of a misbehaving peer is read from each origin's peer trust at the end (failures, times its breaker opened): failures before the breaker first opened = failures − (opened − 1), since each later opening follows one failed half-open probe. The breaker opens after ${TRUST_FAILURES} failures within ${TRUST_WINDOW_MS / 1000} s (trustFailures, trustWindowMs).${probation(o) > 0 ? ` A peer that has not answered an origin yet (since it started, or since the peer's breaker last opened) is sent at most ${probation(o)} of that origin's forwards it has not answered, open or failed (trustMaxUnanswered).` : ""}`,
    "",
    "Fault classes (victims: the slow node n" +
      SLOW_NODE +
      ", the misbehaving peer n" +
      BAD_PEER +
      "; windows of the closed loop; the open loop's scale with its own T):",
    "",
    ...whats.map((s) => `- **${s.label}** (\`${s.classId}\`): ${s.setup.what}.`),
    "",
    ...invariants(o),
    ...targets(o),
    ...causes(o),
    "## Closed loop",
    "",
    ...table(o, "closed"),
    "",
    "## Open loop",
    "",
    ...table(o, "open"),
    "",
    "![p99 by fault class](p99-by-fault.png)",
    "",
    ...investigations(o),
  ];
  return md.join("\n");
}
