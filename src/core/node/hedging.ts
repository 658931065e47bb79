/**
 * Hedging: the origin asking a silent peer again for the answer of a request that runs here, and
 * ending that (hedge.ts says when and why). Part of the origin role: origin.ts owns the pending
 * requests whose `hedge` this sets and ends, and the peer state it reads; kept apart for size.
 */
import { finalCancel } from "./abort-runs.js";
import type { ForwardAcks } from "./forward-acks.js";
import { askAgain, hedgeCancel, hedgeOf, hedgeTimer } from "./hedge.js";
import type { Pending } from "./pending-requests.js";
import type { Targets } from "./targets.js";
import type { Trust } from "./trust.js";
import type { Effect, NodeId } from "./types.js";

export class Hedging {
  constructor(
    private readonly targets: Targets,
    private readonly trust: Trust,
    private readonly acks: ForwardAcks,
    /** The origin's counters: a re-ask counts as a probe. */
    private readonly counters: { probes: number },
    /** Fails a request whose run here failed (`failedHere`) once its hedge ended (answering.ts). */
    private readonly failHeld: (p: Pending, out: Effect[]) => void,
  ) {}

  /** Whether the request's hedge may still answer: a re-ask or its wait is due, its peer reachable. */
  live(p: Pending): boolean {
    const h = hedgeOf(p);
    return h?.armed === true && this.targets.get(h.to) !== undefined && !this.trust.quarantined(h.to);
  }

  /**
   * `to` acked the request's current attempt, then went silent or overdue: it is the one asked from
   * now on; an earlier silent peer's hedge ends now (cancelled).
   */
  begin(p: Pending, to: NodeId, out: Effect[]): void {
    this.end(p, out);
    p.hedge = { to, attempt: p.attempt, asks: 0, epoch: p.ackEpoch };
  }

  /**
   * Asks the silent peer of a request running here for its answer again, if asks are left. A
   * streaming request's hedge ends once its local run has `started` (hedge.ts): that run answers.
   * Asked only of a streaming request with a hedge: the executor walks its running jobs to tell.
   */
  ask(p: Pending, now: number, out: Effect[], started: () => boolean): void {
    if (p.hedge === undefined) return;
    // From now on the peer's answer is refused (answering.ts `lateAnswered`): its cancel is final,
    // its run aborted.
    if (p.request.stream === true && started()) return void this.end(p, out, true, true);
    const h = hedgeOf(p);
    if (h) h.armed = false;
    const peer = h && this.targets.get(h.to);
    // Nothing more to wait for: a request whose run here failed fails now.
    if (!h || !peer || this.trust.quarantined(h.to) || !askAgain(h)) return void this.unheld(p, out);
    this.counters.probes++;
    this.acks.ask(p, h.attempt, h.to, peer, now, out);
    h.armed = true;
    out.push({ type: "set-timer", timer: hedgeTimer(h, p.reqId), delayMs: this.acks.timeoutMs(peer.rttMs) });
  }

  /**
   * No more asking the request's silent peer (it is answered, or another peer went silent on it).
   * The fallback left that peer's job be (hedge.ts): `cancel` drops it now, if still queued there —
   * not when the peer itself answered or refused it, or is gone.
   */
  end(p: Pending, out: Effect[], cancel = true, final = false): void {
    const h = p.hedge;
    if (h === undefined) return;
    out.push({ type: "cancel-timer", timer: hedgeTimer(h, p.reqId) });
    p.hedge = undefined;
    if (!cancel || this.targets.get(h.to) === undefined) return;
    if (!final) return void out.push(hedgeCancel(h, p.reqId));
    out.push(finalCancel(h.to, p.reqId, h.attempt));
    for (const a of p.abandoned ?? []) if (a.to === h.to && a.attempt === h.attempt) a.done = true;
  }

  /** The hedge ends as `end` ends it; the request fails if its run here failed (nothing else answers). */
  stop(p: Pending, out: Effect[], cancel = true, final = false): void {
    this.end(p, out, cancel, final);
    this.unheld(p, out);
  }

  private unheld(p: Pending, out: Effect[]): void {
    if (p.failedHere === undefined) return;
    this.end(p, out);
    this.failHeld(p, out);
  }

  /**
   * `peer` restarted (seen at `epoch`), left or is down (no epoch): its duplicate window is gone, so
   * asking it would run the job again. A restart ends only a hedge on a job an older incarnation took.
   * A request whose local run has `started` takes no answer of that peer once its hedge ends: the
   * cancel is final then, so a peer that drains (its goodbye) aborts the job rather than run it.
   */
  endTo(
    pending: Iterable<Pending>,
    peer: NodeId,
    out: Effect[],
    epoch?: number,
    started?: (reqId: string) => boolean,
  ): void {
    for (const p of pending) {
      const h = p.hedge?.to === peer ? p.hedge : undefined;
      // Re-asked, the job may be the new incarnation's now: its cancel goes (a departed peer may
      // still drain it; a down or removed one is not reached).
      const asked = h !== undefined && h.asks > 0;
      if (epoch !== undefined) tookAlong(p, peer, epoch, asked ? h?.attempt : undefined);
      if (h !== undefined && olderThan(h.epoch, epoch))
        this.stop(p, out, asked || epoch === undefined, started?.(p.reqId) === true);
    }
  }
}

/**
 * Whether a hedge on a job acked in `acked` must end at a restart seen at `epoch`: unlike a forward,
 * one whose epoch is unknown ends too, since asking a new incarnation again would run the job again.
 */
function olderThan(acked: number | undefined, epoch: number | undefined): boolean {
  return epoch === undefined || acked === undefined || acked < epoch;
}

/**
 * `peer` restarted at `epoch`: the attempts an older incarnation acked went with it and are owed no
 * cancel — bar `asked`, one a hedge re-asked since (the new incarnation may run it).
 */
function tookAlong(p: Pending, peer: NodeId, epoch: number, asked: number | undefined): void {
  for (const a of p.abandoned ?? [])
    if (a.to === peer && a.epoch !== undefined && a.epoch < epoch && a.attempt !== asked) a.done = true;
}
