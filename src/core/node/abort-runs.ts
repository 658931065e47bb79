/**
 * Aborted engine runs: a job running on our engine whose answer nobody takes any more is aborted,
 * when the engine can end a run without its cache and our tree disagreeing (config `abortRuns`,
 * from EngineInfo.abortable). Three ways a running answer goes unwanted:
 *  - `clientGone`: our client hung up (client-gone.ts) while its job ran here;
 *  - `hedged`: a hedge's peer answered the request first (hedge.ts);
 *  - `cancelled`: the origin of a forward we run sent its final cancel: no answer of that attempt is
 *    taken any more, so the run is aborted. A cancel on a fallback is not final: a late answer still
 *    answers a request that waits (answering.ts `lateAnswered`), so that run goes on — until the request
 *    settles, or its own run starts at the origin (from then on only a hedge's answer is taken, and
 *    not a stream's: answering.ts `lateAnswered`, hedge.ts). Then every attempt it moved on from with
 *    such a cancel gets a final one (`owedCancels`: one per attempt, and none for a peer that
 *    answered it, was sent one already, restarted since it took the job, or is no member any more:
 *    nothing to reach — unless it left saying goodbye: it drains what it took, so it is still sent
 *    the final cancels it is owed, and nothing else; with gossip at its leave, since a non-member's
 *    answers are dropped: forward-attempts.ts `departed`). Our own restart cancels our forwards finally
 *    too (node-lifecycle.ts `restart`).
 * The executor asks (`abort-run`) and keeps the job until the engine says it ended: `engine-aborted`
 * (nothing inserted, as for a failure; an engine-managed cache's sequences taken as they are), or
 * `engine-done` if the run finished first (its answer then goes unreplied, as before aborts).
 */
import type { Abandoned } from "./pending-requests.js";
import type { Effect, NodeId } from "./types.js";

export type AbortReason = "clientGone" | "hedged" | "cancelled";

/** The executor counter of each reason (NodeStats). */
export const ABORT_COUNTER = {
  clientGone: "abortedClientGone",
  hedged: "abortedHedged",
  cancelled: "abortedCancelled",
} as const satisfies Record<AbortReason, string>;

/** The cancel that tells `to` no answer of its attempt is taken any more: it may abort the run. */
export function finalCancel(to: NodeId, reqId: string, attempt: number): Effect {
  return { type: "send", to, msg: { type: "cancel", reqId, attempt, final: true } };
}

/**
 * The final cancels a request owes the peers of the attempts it moved on from (`abandoned`), those
 * that `reachable` says we can still send to or that left draining (`left`), and `owed` (all by
 * default) picks: each goes once.
 */
export function owedCancels(
  p: { reqId: string; abandoned?: readonly Abandoned[] | undefined },
  reachable: (id: NodeId) => boolean,
  out: Effect[],
  owed: (a: Abandoned) => boolean = () => true,
): void {
  for (const a of p.abandoned ?? []) {
    if (a.done === true || (a.left !== true && !reachable(a.to)) || !owed(a)) continue;
    a.done = true;
    out.push(finalCancel(a.to, p.reqId, a.attempt));
  }
}

/**
 * Marks `final` the cancels of this step whose request settled in it (`pending` says it no longer
 * waits): no answer for them is taken any more, so their peer may abort a run it started. A peer
 * gets one cancel per attempt a step: a copy (the hedge's end and the owed ones may name the same)
 * is dropped, its finality kept.
 */
export function markFinalCancels(out: Effect[], pending: (reqId: string) => boolean): void {
  let seen: Map<string, number> | undefined;
  let kept = 0;
  for (const e of out) {
    if (e.type !== "send" || e.msg.type !== "cancel") {
      out[kept++] = e;
      continue;
    }
    const final = e.msg.final === true || !pending(e.msg.reqId);
    const key = `${e.to}\u0000${e.msg.reqId}\u0000${e.msg.attempt}`;
    seen ??= new Map();
    const at = seen.get(key);
    if (at !== undefined) {
      if (final) out[at] = finalCancel(e.to, e.msg.reqId, e.msg.attempt);
      continue;
    }
    seen.set(key, kept);
    out[kept++] = final && e.msg.final !== true ? { ...e, msg: { ...e.msg, final: true } } : e;
  }
  out.length = kept;
}
