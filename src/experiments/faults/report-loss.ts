/**
 * The fault report's 30% loss target (report.ts): its row beside the bound, and why a missed bound is
 * missed. The bound (3 × the ack timeout + one local run) has no queueing in it: the verdict reads it
 * against the whole latency and, where the run measured every queue wait (`otherQueueMs`), against
 * what is left without them too (the network's and the runs' share).
 */
import type { DAEMON_NODE_DEFAULTS } from "../../core/node/config.js";
import type { FaultRunResult, Loop } from "./measure.js";
import type { FaultsOutcome } from "./run.js";

const s3 = (x: number) => x.toFixed(3);
const s1 = (x: number) => x.toFixed(1);

interface LossRun {
  loop: Loop;
  r: FaultRunResult;
  ff: FaultRunResult;
  bound: number;
}

function must(o: FaultsOutcome, classId: string, loop: Loop): FaultRunResult {
  const r = o.runs.find((x) => x.classId === classId && x.loop === loop);
  if (!r) throw new Error(`fault report: no ${classId} run in the ${loop} loop`);
  return r;
}

/** The ack timeout the run had, s. */
const ackS = (o: FaultsOutcome) =>
  (o.daemonDefaults as typeof DAEMON_NODE_DEFAULTS).forwardAckTimeoutMs / 1000;

function lossRuns(o: FaultsOutcome): LossRun[] {
  return (["closed", "open"] as const).map((loop) => {
    const r = must(o, "loss-30", loop);
    const ff = must(o, "fault-free", loop);
    return { loop, r, ff, bound: 3 * ackS(o) + ff.maxRunS };
  });
}

/** Whether the run measured every queue wait (records with `otherQueueMs`), not the answering run's only. */
export function allQueueWaits(o: FaultsOutcome): boolean {
  return o.runs.every((r) => r.slowest === undefined || r.slowest.otherQueueS !== undefined);
}

const warm = (w: { from: number }) =>
  `after the warm-up (requests from no. ${w.from}; every run starts with empty caches)`;

/**
 * The target as written: met by the whole latency, else not met. Only then, with every queue wait
 * measured and no attempt waiting out the forward timeout, it adds that the second reading is met.
 */
function verdict(loss: LossRun[], all: boolean): string {
  if (loss.every((x) => x.r.maxS <= x.bound)) return "met";
  const unqueued = loss.every((x) => x.r.maxUnqueuedS <= x.bound && x.r.forwardTimeouts === 0);
  const over = loss.filter((x) => x.r.maxS > x.bound).map((x) => `${x.loop} loop`);
  return `**not met** (${over.join(", ")}${all && unqueued ? "; met without queue waits" : ""})`;
}

/** The target's row of the targets table. */
export function lossRow(o: FaultsOutcome): string {
  const all = allQueueWaits(o);
  const loss = lossRuns(o);
  const cells = loss.map(
    (x) =>
      `${x.loop} loop: ${x.r.forwardTimeouts} forward attempts waited out the forward timeout; max ${s3(x.r.maxS)} s vs bound ${s3(x.bound)} s (3 × ${ackS(o)} s + the fault-free run's longest engine run); max without its queue ${all ? "waits (every queue it waited in)" : "wait"} ${s3(x.r.maxUnqueuedS)} s${x.r.afterWarmup ? `; ${warm(x.r.afterWarmup)}: max ${s3(x.r.afterWarmup.maxS)} s` : ""}`,
  );
  return `| 30% loss of all messages: no request waits for the 30 s forward timeout (max ≤ 3 × the ack timeout + one local run) | ${cells.join("; ")} | ${verdict(loss, all)} |`;
}

/** Why the bound is missed by the whole latency, from the records (undefined: it is not). */
export function lossCause(o: FaultsOutcome): string | undefined {
  const losses = lossRuns(o);
  if (!losses.some((x) => x.r.maxS > x.bound)) return undefined;
  const ack = ackS(o);
  const w = losses
    .map(({ r }) => {
      const x = r.slowest;
      const other = x?.otherQueueS ?? 0;
      return x
        ? `${r.loop} loop: request ${x.index} took ${s1(x.latencyS)} s — ${s1(x.networkS - other)} s waiting on forwards (${x.fallbacks} fallbacks), ${s1(x.queueS + other)} s queued${other > 0 ? ` (${s1(other)} s of it at peers it gave up on or at its origin before it moved)` : ""}, ${s1(x.runS)} s running`
        : "";
    })
    .join("; ");
  const unqueued = losses
    .map(({ loop, r, bound }) => {
      const by = r.maxUnqueuedS - bound;
      return `${loop} loop ${s3(r.maxUnqueuedS)} s (${by > 0 ? `${s3(by)} s above` : "within"} its bound ${s3(bound)} s)`;
    })
    .join(", ");
  const share = allQueueWaits(o)
    ? ` A second reading, not the target's: less every queue wait (the answering run's, and the other queues it waited in: at peers whose attempt its origin gave up on, at its origin before offload moved it), the longest request takes ${unqueued}.`
    : "";
  const d = o.daemonDefaults as typeof DAEMON_NODE_DEFAULTS;
  const ffOpen = must(o, "fault-free", "open");
  const openQueues =
    ffOpen.maxS > 3 * ack + ffOpen.maxRunS
      ? ` (the fault-free open loop's own max is ${s3(ffOpen.maxS)} s, above its bound: that loop cannot meet the bound while it counts queue waits)`
      : "";
  const recovery =
    d.answerRecovery === true
      ? `Answer recovery is on: a lost answer is asked for again (the forward re-sent, the peer re-sends the answer it kept) half an ack timeout after the origin's estimate of it and at least every 4 ack timeouts, and after ${d.maxTimedOutAttempts} timed-out waits (no ack, a probe unanswered, a silent peer) a request stops trying peers and runs on its own node ahead of the queue. So the network's share is a few ack timeouts; what is left above the bound is runs and queues: a request whose cached peer lost its answer runs again uncached here, and in the open loop a request waits in congested queues: a peer's, until its origin gives up on it (its ack timers, or its membership suspecting that peer under the loss) or its answer is lost, then its own node's${openQueues}.`
      : `A lost *answer* is noticed only when it is overdue (3 × the expected time the peer acked + 1 s, at most the ${d.forwardTimeoutMs / 1000} s forward timeout): the configuration has answer probes and answer recovery off. The simulator's loss is silent, harsher than TCP; chained losses add up.`;
  return `- **30% loss.** ${w}.${share} A lost forward or ack costs one ack timeout (${ack} s). ${recovery}`;
}
