/**
 * Queue waits a request's record would otherwise miss (a measurement, not part of the protocol). The
 * record counts only the queue of the run whose answer it got (`queueMs`); the rest of its queueing
 * would read as network time (`networkMs`): a forward's wait in a congested peer's queue while its
 * origin waited on that attempt before giving up, and its wait in its origin's own queue before
 * offload moved it, or before a peer's late answer took it out.
 *
 * A forward attempt's origin wait runs from its first send to its end at the origin (its forward
 * timer cancelled or fired); each of its stays at the peer queues from a delivery there to that
 * peer's start of the run, its answer (an error included), its crash or its drop past its deadline:
 * what overlaps counts. A copy delivered after a stay closed (a restarted peer, an error it did not
 * keep) queues anew. The origin holds a request from its submission, and from each attempt's end,
 * until it forwards it anew, runs it or replies: its own queue, counted whatever else happens
 * meanwhile (a peer's run, its lost answer): it was queued. A run is service, never a wait, even
 * one its origin gave up on: the reading is latency less every queue wait, so what is left keeps
 * every run; a later attempt waiting behind such a run at that peer still waits. The waits overlap
 * each other and the answering run: what counts is their union with the answering run's wait and
 * run, less those two (`queueMs` and the run: in the record already), so each instant counts once.
 */
import { expiry } from "../core/node/executor/jobs.js";

/**
 * One stay of a forward at its peer: from a delivery there to the end of its queue wait (a run, an
 * answer without one, the peer's crash, or its drop). A delivery after the last stay closed (answered,
 * an error included, or lost) is a new stay: a re-send the peer takes again (a restarted peer, one
 * whose earlier answer was an error it did not keep) queues again there.
 */
interface Stay {
  queuedAt: number;
  /** Its place in the peer's queue, among every request's: forwards run there in the order they arrived. */
  seq: number;
  /** Past this, its turn drops it unrun and unanswered (the executor's rule, executor/jobs.ts). */
  expiresAt: number;
  /** When the peer started running it: its wait there ends, the run is service, never a wait. */
  ranAt?: number;
  /** When the peer answered it (the end of its run there, if it ran it). */
  answeredAt?: number;
  /**
   * When the job left the peer unanswered: its crash, or the start there past its expiry of a later
   * arrival known here (a drop shows no sooner). A drop no such start follows (the queue ran dry, or
   * only the peer's own clients' jobs, spot checks or forgotten requests' forwards ran) goes unseen:
   * its wait ends with its origin's, and a copy the peer takes anew meanwhile reads as the same job.
   */
  lostAt?: number;
}

const ranAndAnswered = (x: Stay): boolean => x.ranAt !== undefined && x.answeredAt !== undefined;

interface Attempt {
  peer: number;
  attempt: number;
  sentAt: number;
  endedAt?: number;
  stays: Stay[];
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
  /** Stays opened so far, every request's: the next one's `seq`. */
  private stays = 0;

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
    w.attempts.push({ peer, attempt, sentAt: now, stays: [] });
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

  /**
   * The attempt's forward, with its `deadlineMs`, reached `peer`: queued there unless it starts or is
   * answered at once. A copy while its stay is open (queued, running) is the same job; one after it
   * closed is a new stay. Stays grow by deliveries only, so by the copies its origin sent.
   */
  delivered(reqId: string, peer: number, attempt: number, now: number, deadlineMs?: number): void {
    const a = this.find(reqId, peer, attempt);
    if (a === undefined || open(a) !== undefined) return;
    a.stays.push({ queuedAt: now, seq: this.stays++, expiresAt: expiry(deadlineMs, now) });
  }

  /**
   * `peer` started running `reqId` (no `attempt`), or answered that attempt of it (a result or an
   * error): its queue wait there is over. A run names no attempt: it is the earliest arrival queued
   * there, as forwards keep their order in a peer's queue (priority and offload move clients' jobs
   * only); earlier arrivals past their expiry, any request's, were dropped at their turn, by now,
   * unanswered. A later arrival waits on behind the run.
   */
  left(reqId: string, peer: number, now: number, attempt?: number): void {
    if (attempt !== undefined) {
      const a = this.find(reqId, peer, attempt);
      const s = a === undefined ? undefined : open(a);
      if (s !== undefined) s.answeredAt = now;
      return;
    }
    const mine = queued(this.byReq.get(reqId), peer).sort((x, y) => x.seq - y.seq);
    const ran = mine.find((s) => now <= s.expiresAt);
    if (ran === undefined) {
      // All past their expiry: dropped at their turn; what ran is a job of it not known here.
      for (const s of mine) s.lostAt = now;
      return;
    }
    ran.ranAt = now;
    // Its turn came after every earlier arrival's there: one past its expiry was dropped, and a
    // request with nothing of its own behind it hears of that from no run of its own.
    for (const w of this.byReq.values())
      for (const s of queued(w, peer)) if (s.seq < ran.seq && now > s.expiresAt) s.lostAt = now;
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
      const answers = answeredBy?.peer === a.peer && answeredBy.attempt === a.attempt;
      // The stay whose run sent the result: a re-sent answer's stay runs nothing, and a restarted
      // peer's new run may not have answered yet when the old incarnation's answer arrives.
      const mine = answers ? (a.stays.findLast(ranAndAnswered) ?? a.stays.at(-1)) : undefined;
      for (const x of a.stays) {
        if (x === mine) {
          const start = x.ranAt ?? x.answeredAt ?? now;
          answering = [x.queuedAt, start];
          run = [start, x.answeredAt ?? now];
          continue;
        }
        // Its wait while the origin waited on the attempt; a run is service, not a wait.
        const to = Math.min(x.ranAt ?? x.answeredAt ?? x.lostAt ?? now, a.endedAt ?? now);
        waits.push([Math.max(x.queuedAt, a.sentAt), to]);
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
      for (const a of w.attempts) {
        const s = a.peer === node ? open(a) : undefined;
        if (s !== undefined) s.lostAt = now;
      }
  }
}

/** The attempt's last stay at its peer if the job is still there (queued or running). */
function open(a: Attempt): Stay | undefined {
  const s = a.stays.at(-1);
  return s === undefined || s.answeredAt !== undefined || s.lostAt !== undefined ? undefined : s;
}

/** The request's stays queued at `peer`, not started. */
function queued(w: Waits | undefined, peer: number): Stay[] {
  const out: Stay[] = [];
  for (const a of w?.attempts ?? []) {
    const s = a.peer === peer ? open(a) : undefined;
    if (s !== undefined && s.ranAt === undefined) out.push(s);
  }
  return out;
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
