/** `prefixmesh sim`'s human summary: the paper's measurements, the mesh's traffic and the faults run. */
import { DAEMON_NODE_DEFAULTS } from "../core/node/config.js";
import { faultFlags } from "../sim/fault-schedule.js";
import { simGossip } from "../sim/setup.js";
import type { SimConfig, SimResult } from "../sim/types.js";
import { historyHits, hitRate, idealHits } from "../workload/ideal-hit.js";
import type { Workload } from "../workload/types.js";

function fmtBytes(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}

/**
 * The human summary. Its percentiles are the result's own (`totals`), the figures `--json` and the
 * experiments report, so the two never disagree.
 */
export function formatSummary(
  r: SimResult,
  workloadLabel: string,
  bound?: { ideal: number; history?: number },
): string {
  const t = r.totals;
  const p50 = t.p50LatencyMs;
  const p99 = t.p99LatencyMs;
  const c = r.config;
  const lines = [
    `prefixmesh sim — ${c.nodes} node${c.nodes === 1 ? "" : "s"}, policy ${c.policy}, Δcomm ${c.commMs} ± ${c.jitterMs} ms, Δpoll ${c.pollMs} ms, profile ${r.profile.name}, KV ${r.capacityTokens} tokens/node, seed ${c.seed}`,
    `workload ${workloadLabel}: ${t.requests} requests${r.workload.synthetic ? " (SYNTHETIC data)" : ""}`,
    // The label names the mode the run used (`--gossip` over the daemon's default).
    ...(c.daemonConfig
      ? [
          `nodes      as the daemon configures them: ${daemonConfigLabel({ ...c.node, gossip: simGossip(c) })}`,
        ]
      : []),
    ...(simGossip(c) === "scuttlebutt"
      ? [
          `mesh       scuttlebutt: SWIM membership through 2 seeds, digests to 3 members per Δpoll${c.maxEstimates ? `, at most ${c.maxEstimates} estimates` : ""}`,
        ]
      : []),
    ...(c.oracle
      ? ["ORACLE     every estimate = its owner's true tree, instantly and free (simulation-only reference)"]
      : []),
    `latency    mean ${(t.meanLatencyMs / 1000).toFixed(3)} s   p50 ${(p50 / 1000).toFixed(3)} s   p99 ${(p99 / 1000).toFixed(3)} s`,
    `hit rate   expected ${(100 * t.expectedHitRate).toFixed(1)}%   actual ${(100 * t.actualHitRate).toFixed(1)}%` +
      (bound ? `   ideal ${(100 * bound.ideal).toFixed(1)}%` : "") +
      (bound?.history !== undefined ? `   own history ${(100 * bound.history).toFixed(1)}%` : ""),
    `hotspot    ${(100 * t.hotspotShare).toFixed(1)}% of requests on n${t.hotspotNode}   forwarded ${(100 * t.forwardedShare).toFixed(1)}%`,
    `served     ${r.perNode.map((n) => `${n.id}=${n.served}`).join(" ")}`,
    `messages   ${t.messagesTotal} (${fmtBytes(t.bytesTotal)}): ${Object.entries(t.messages)
      .map(([k, v]) => `${k} ${v.count} / ${fmtBytes(v.bytes)}`)
      .join(", ")}`,
    `answered   ${t.answered}/${t.requests}${t.failed ? `, ${t.failed} failed` : ""}${t.incorrect ? `, ${t.incorrect} WRONG` : ""}   fallbacks ${t.fallbacks}   late replies ${t.lateReplies}`,
    `engine     ${t.engineRuns} runs, ${t.duplicateRuns} duplicate, ${aborted(t)}, busy ${(t.engineBusyMs / 1000).toFixed(1)} s   forwards cancelled ${t.cancelledForwards}, refused by deadline ${t.rejectedDeadline}`,
    `acks       ${t.ackTimeouts} ack timeouts, ${t.probes} probes, ${t.resends} unacked re-sends, ${t.resentAnswers} answers re-sent`,
    `simulated  ${(r.virtualMs / 1000).toFixed(1)} s virtual in ${(r.wallMs / 1000).toFixed(2)} s wall (${Math.round(t.requests / (r.wallMs / 1000))} requests/s, ${r.events} events)`,
  ];
  const f = c.faults;
  if (f) {
    const n = f.network ?? {};
    const crashes = r.perNode.reduce((k, x) => k + x.crashes, 0);
    lines.push(
      `faults     loss ${n.lossProb ?? 0}, duplication ${n.dupProb ?? 0}, reordering ${n.reorderProb ?? 0}, partitions ${n.partitions?.length ?? 0}, engine failures ${f.engine?.failProb ?? 0}, slow engines ${f.engine?.slowdowns?.length ?? 0}, crashes ${crashes}, pauses ${f.node?.pauses?.length ?? 0}, stalling peers ${f.node?.stalls?.length ?? 0}, refusing peers ${f.node?.refuses?.length ?? 0}, lying peers ${f.node?.lies?.length ?? 0}, unauthenticated nodes ${f.node?.unauthenticated?.length ?? 0}, unbounded requests ${f.client?.unbounded?.length ?? 0}, clients gone ${t.abandoned ?? 0}, client re-submissions ${t.retries}`,
      `schedule   ${faultFlags(f).join(" ")}`,
    );
  }
  const never = r.faultsNeverBegun;
  if (never !== undefined)
    lines.push(
      `never      the workload was done at ${(never.afterMs / 1000).toFixed(1)} s virtual, before ${never.faults.join(", ")}: the run stopped without them`,
    );
  return `${lines.join("\n")}\n`;
}

/**
 * DAEMON_NODE_DEFAULTS as the help states them; for a run (`over`: its node flags), the node settings
 * it ran with (the policy is on the summary's first line).
 */
export function daemonConfigLabel(over?: SimConfig["node"]): string {
  const entries = Object.entries(
    over === undefined ? DAEMON_NODE_DEFAULTS : { ...DAEMON_NODE_DEFAULTS, ...over },
  );
  return (
    entries
      .filter(([k]) => over === undefined || k !== "policy")
      // Nested settings (policyConfig, costPrior, swim) as JSON: what --node-config takes.
      .map(([k, v]) => `${k} ${typeof v === "object" && v !== null ? JSON.stringify(v) : v}`)
      .join(", ")
  );
}

/**
 * The ideal hit rate over the requests in the order they were sent (an open-loop chat's follow-ups
 * go out when their predecessor is answered, so only the run knows that order), and for chat the
 * share a conversation's own history alone would give.
 */
export function hitBounds(w: Workload, r: SimResult): { ideal: number; history?: number } | undefined {
  if (r.records.length !== w.requests.length) return undefined;
  const order = r.records
    .map((rec) => [rec.startMs, rec.index] as const)
    .sort((a, b) => a[0] - b[0] || a[1] - b[1])
    .map(([, i]) => i);
  const ideal = hitRate(w.requests, idealHits(w.requests, order));
  return w.meta?.chat ? { ideal, history: hitRate(w.requests, historyHits(w.requests)) } : { ideal };
}

/** Runs aborted (nobody took the answer), by reason. */
function aborted(t: SimResult["totals"]): string {
  const n = t.abortedClientGone + t.abortedHedged + t.abortedCancelled;
  if (n === 0) return "0 aborted";
  return `${n} aborted (client gone ${t.abortedClientGone}, hedged ${t.abortedHedged}, cancelled ${t.abortedCancelled})`;
}
