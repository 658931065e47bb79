/**
 * Queue waits a request's record would otherwise miss (a measurement, not part of the protocol). The
 * record counts only the queue of the run whose answer it got (`queueMs`); the rest of its queueing
 * would read as network time (`networkMs`): a forward's wait in a congested peer's queue while its
 * origin waited on that attempt before giving up, and its wait in its origin's own queue before
 * offload moved it, or before a peer's late answer took it out.
 *
 * A forward attempt's origin wait runs from its first send to its end at the origin (its forward
 * timer cancelled or fired); its queue at the peer from the forward's first delivery there to that
 * peer's start of the run, its answer (an error included) or its crash: what overlaps counts. The
 * origin holds a request from its submission, and from each attempt's end, until it forwards it anew,
 * runs it or replies: its own queue. The waits overlap each other and the answering run (the origin may hold
 * it while a late answer's peer still queues or runs it): what counts is their union with the
 * answering run's wait and run, less those two (`queueMs` and the run: in the record already).
 */

interface Attempt {
  peer: number;
  attempt: number;
  sentAt: number;
  endedAt?: number;
  queuedAt?: number;
  startedAt?: number;
  /** When the peer answered it (the end of its run there, if it ran it). */
  answeredAt?: number;
  /** When the peer crashed with it queued: the job went with it (a later re-delivery is not counted). */
  lostAt?: number;
}

/** A wait at the origin, [from, to]; `run`: its run there ended it. */
type Held = [from: number, to: number, run: boolean];

interface Waits {
  /** Since when its origin holds it (queued there), if it does. */
  heldSince?: number;
  held: Held[];
  attempts: Attempt[];
}

export class QueueWaits {
  /** Requests not replied to yet, by reqId. */
  private readonly byReq = new Map<string, Waits>();

  private of(reqId: string): Waits {
    let w = this.byReq.get(reqId);
    if (w === undefined) {
      w = { held: [], attempts: [] };
      this.byReq.set(reqId, w);
    }
    return w;
  }

  private find(reqId: string, peer: number, attempt?: number): Attempt | undefined {
    const list = this.byReq.get(reqId)?.attempts ?? [];
    for (let i = list.length - 1; i >= 0; i--) {
      const a = list[i] as Attempt;
      if (a.peer === peer && (attempt === undefined || a.attempt === attempt)) return a;
    }
    return undefined;
  }

  /** The origin stops holding it: `run` when it starts running it itself. */
  private release(w: Waits, now: number, run: boolean): void {
    if (w.heldSince === undefined) return;
    w.held.push([w.heldSince, now, run]);
    w.heldSince = undefined;
  }

  /** A client's request reached its origin. */
  submitted(reqId: string, now: number): void {
    this.of(reqId).heldSince = now;
  }

  /**
   * Its origin sent attempt `attempt` of `reqId` to `peer`. A re-send changes nothing: a hedge re-asks
   * an abandoned attempt while the request stays in its origin's queue.
   */
  sent(reqId: string, peer: number, attempt: number, now: number): void {
    if (this.find(reqId, peer, attempt) !== undefined) return;
    const w = this.of(reqId);
    this.release(w, now, false);
    w.attempts.push({ peer, attempt, sentAt: now });
  }

  /** The origin stopped waiting on the attempt (its forward timer cancelled or fired): it holds it. */
  ended(reqId: string, attempt: number, now: number): void {
    const w = this.byReq.get(reqId);
    if (w === undefined) return;
    for (const a of w.attempts) if (a.attempt === attempt) a.endedAt ??= now;
    w.heldSince ??= now;
  }

  /** Its origin started running it. */
  ranHere(reqId: string, now: number): void {
    const w = this.byReq.get(reqId);
    if (w !== undefined) this.release(w, now, true);
  }

  /** The attempt's forward reached `peer`: queued there unless it starts or is answered at once. */
  delivered(reqId: string, peer: number, attempt: number, now: number): void {
    const a = this.find(reqId, peer, attempt);
    if (a !== undefined && a.queuedAt === undefined) a.queuedAt = now;
  }

  /** `peer` started running `reqId`, or answered an attempt of it: its queue wait there is over. */
  left(reqId: string, peer: number, now: number, attempt?: number): void {
    const a = this.find(reqId, peer, attempt);
    if (a?.queuedAt === undefined) return;
    a.startedAt ??= now;
    if (attempt !== undefined) a.answeredAt ??= now;
  }

  /**
   * The reply to `reqId` at `now` — a peer's answer to one attempt (`answeredBy`), else its origin's
   * run: its queue waits outside `queueMs`. Forgets the request.
   */
  take(reqId: string, now: number, answeredBy?: { peer: number; attempt: number }): number {
    const w = this.byReq.get(reqId);
    if (w === undefined) return 0;
    this.byReq.delete(reqId);
    this.release(w, now, false);
    // The answering run's wait and run: at the peer that answered; else the last run here.
    let answering: [number, number] | undefined;
    let run: [number, number] | undefined;
    const waits: [number, number][] = [];
    for (const a of w.attempts) {
      if (a.queuedAt === undefined) continue;
      if (answeredBy !== undefined && a.peer === answeredBy.peer && a.attempt === answeredBy.attempt) {
        answering = [a.queuedAt, a.startedAt ?? now];
        run = [a.startedAt ?? now, a.answeredAt ?? now];
      } else {
        const to = Math.min(a.startedAt ?? now, a.endedAt ?? now, a.lostAt ?? now);
        waits.push([Math.max(a.queuedAt, a.sentAt), to]);
      }
    }
    const lastRun = w.held.findLastIndex((h) => h[2]);
    w.held.forEach((h, i) => {
      if (answeredBy === undefined && i === lastRun) {
        answering = [h[0], h[1]];
        run = [h[1], now];
      } else waits.push([h[0], h[1]]);
    });
    let known = 0;
    for (const x of [answering, run]) {
      if (x === undefined) continue;
      waits.push(x);
      known += x[1] - x[0];
    }
    return Math.max(0, unionMs(waits) - known);
  }

  /** A request whose client gave up on this try (it hung up): forgotten. */
  drop(reqId: string): void {
    this.byReq.delete(reqId);
  }

  /**
   * Node `node` crashed: the requests it originated (`outstanding`) are forgotten (their clients
   * re-submit), and what waited in its queue for other origins waits no more.
   */
  crashed(node: number, outstanding: Iterable<string>, now: number): void {
    for (const reqId of outstanding) this.byReq.delete(reqId);
    for (const w of this.byReq.values())
      for (const a of w.attempts)
        if (a.peer === node && a.queuedAt !== undefined && a.startedAt === undefined) a.lostAt ??= now;
  }
}

/** The length of the union of intervals [from, to] (empty ones ignored). */
export function unionMs(xs: [number, number][]): number {
  const sorted = xs.filter((x) => x[1] > x[0]).sort((a, b) => a[0] - b[0]);
  let ms = 0;
  let end = Number.NEGATIVE_INFINITY;
  for (const [from, to] of sorted) {
    if (to <= end) continue;
    ms += to - Math.max(from, end);
    end = to;
  }
  return ms;
}
