/**
 * Aborted engine runs: a job running on our engine whose answer nobody takes any more is aborted,
 * when the engine can end a run without its cache and our tree disagreeing (config `abortRuns`,
 * from EngineInfo.abortable). Three ways a running answer goes unwanted:
 *  - `clientGone`: our client hung up (client-gone.ts) while its job ran here;
 *  - `hedged`: a hedge's peer answered the request first (hedge.ts);
 *  - `cancelled`: the origin of a forward we run sent its final cancel — one sent as the request
 *    settles there, so its answer would be dropped as late. A cancel on a fallback is not final: a
 *    late answer still answers a request that waits (origin.ts `lateAnswered`), so that run goes on.
 * The executor asks (`abort-run`) and keeps the job until the engine says it ended: `engine-aborted`
 * (nothing inserted, as for a failure; an engine-managed cache's sequences taken as they are), or
 * `engine-done` if the run finished first (its answer then goes unreplied, as before aborts).
 */
import type { Effect } from "./types.js";

export type AbortReason = "clientGone" | "hedged" | "cancelled";

/** The executor counter of each reason (NodeStats). */
export const ABORT_COUNTER = {
  clientGone: "abortedClientGone",
  hedged: "abortedHedged",
  cancelled: "abortedCancelled",
} as const satisfies Record<AbortReason, string>;

/**
 * Marks `final` the cancels of this step whose request settled in it (`pending` says it no longer
 * waits): no answer for them is taken any more, so their peer may abort a run it started.
 */
export function markFinalCancels(out: Effect[], pending: (reqId: string) => boolean): void {
  for (let i = 0; i < out.length; i++) {
    const e = out[i] as Effect;
    if (e.type === "send" && e.msg.type === "cancel" && !pending(e.msg.reqId))
      out[i] = { ...e, msg: { ...e.msg, final: true } };
  }
}
