/**
 * Peer trust (beyond the paper's crash-only model, advisory like every estimate): what this node,
 * as an origin, has seen of each peer's answers to its forwards, and a circuit breaker over it.
 *
 * Outcomes of a forward attempt:
 *  - answered → a success (a half-open breaker closes);
 *  - failed → acked but not answered by its expected time plus slack, an error that is no refusal
 *    for load, or the forward timeout: the score falls, and `failures` of them within `windowMs`,
 *    or in a row without an answer in time between them, open the breaker (SGLang's gateway opens after
 *    10 in 120 s: a stalled forward costs a client seconds, so a few suffice);
 *  - answered late → past the attempt's first deadline, kept open by output it streamed (forward-acks.ts
 *    `streamed`): the answer is taken and is progress, but counts as the failure that deadline made it
 *    before, not a success (no streak reset), as does its client hanging up then, or its own refusal for
 *    load or goodbye then (forward-attempts.ts `endsLate`; our own cancel never marks it): a peer
 *    streaming slower than it promised is demoted after a few, one late once under load is not (slack
 *    covers lateness). Each such mark is also counted apart (`late`), at most once per attempt;
 *  - refused for load (overloaded, a deadline it cannot meet, busy: load-refusal.ts) → no mark (a late
 *    stream's aside), only a back-off that doubles while refusals continue: being busy is honest,
 *    and push-back already says so;
 *  - anything else (unreachable, departed, restarted, our own cancel, a forward never acked; a late
 *    stream's goodbye aside) → neutral: liveness and membership handle those, and a lost forward or
 *    ack is the network's doing (under heavy loss honest peers would be demoted) — except for a
 *    half-open probe: a demoted peer that does not even ack the one forward it is given to prove
 *    itself stays demoted.
 * Breaker: closed → open (not routable for `openMs`) → half-open (one forward may probe) → closed on
 * its success, or open again for twice as long (at most `maxOpenMs`) on its failure.
 *
 * Probation. An overdue answer is judged against the time the peer itself said it needs, so a peer
 * that acks and never answers, with a long queue to show, would be sent forward after forward while
 * the first ones wait out their long deadlines. So a peer on probation — it has not answered any
 * forward of ours yet, since we (re)started or since its breaker last opened — is sent at most
 * `maxUnanswered` forwards it has not answered, open or failed, since its last answer (`mayHold`):
 * more go elsewhere until it answers one, or one ends without failing (TCP's initial window, in
 * forwards); that many failures in a row open its breaker. It still ranks as a candidate: only the
 * forward it would take goes elsewhere. One answer ends the probation, so an honest peer, even a
 * slow one, is held back at most until its first answer; one that stops answering later is caught
 * by its deadlines and the breaker. Each open attempt is stamped with the count of answers the peer
 * had given when it was sent, so "sent since its last answer" is one comparison.
 *
 * Part of the origin role (forward-attempts.ts, answering.ts and origin.ts report outcomes; node.ts asks
 * `routable` and, through the origin, `mayHold`). Pure: time comes in.
 */
import { invariant } from "../invariant.js";
import { freshTrust, type PeerTrust, viewOf } from "./trust-record.js";
import type { DepartedTrustView, NodeId, TrustView } from "./types.js";

export type { BreakerState, DepartedTrustView, TrustView } from "./types.js";

export interface TrustConfig {
  enabled: boolean;
  /** Failures within `windowMs` that open the breaker. */
  failures: number;
  windowMs: number;
  /** First open period, ms (doubles per failed half-open probe, up to `maxOpenMs`). */
  openMs: number;
  maxOpenMs: number;
  /** Open forwards a peer may hold with none of them answered since it was sent (0: no bound). */
  maxUnanswered: number;
}

/** Weight of the newest outcome in the score. */
const SCORE_ALPHA = 0.25;
/** First back-off after a load refusal, ms (doubles per refusal in a row, up to `maxOpenMs`). */
const BUSY_BACKOFF_MS = 250;
/** Open attempts remembered per peer (the oldest is forgotten beyond: a bound, not a limit). */
const MAX_OPEN_ATTEMPTS = 1024;
/** Quarantined peers remembered while out of the membership (the oldest caught is forgotten beyond). */
export const MAX_QUARANTINED = 4096;
/** Peers whose record is kept while out of the membership (the one gone longest is forgotten beyond). */
export const MAX_DEPARTED = 4096;

export class Trust {
  private readonly peers = new Map<NodeId, PeerTrust>();
  /**
   * Peers quarantined, kept while they are out of the membership: one declared dead that refutes it,
   * leaves and rejoins, or drops out of DNS and back is added again, and its wrong answers are not
   * undone by that — only our restart ends a quarantine (spot-check.ts).
   */
  private readonly caught = new Set<NodeId>();
  /**
   * The records of peers out of the membership, gone longest first: one declared dead that refutes
   * it comes back with its breaker and failure history, or a staller slow to answer pings would
   * return each time with a clean breaker and cost its callers fresh forward timeouts. One back in a
   * newer epoch (a restart) keeps it too, bar what a restart ends (`restarted`).
   */
  private readonly departed = new Map<NodeId, { record: PeerTrust; at: number }>();

  constructor(private readonly config: TrustConfig) {
    invariant(config.failures >= 1 && config.openMs > 0, "trust: failures ≥ 1 and openMs > 0");
    invariant(config.maxUnanswered >= 0, "trust: maxUnanswered ≥ 0");
  }

  get enabled(): boolean {
    return this.config.enabled;
  }

  reset(ids: readonly NodeId[]): void {
    this.peers.clear();
    this.caught.clear();
    this.departed.clear();
    for (const id of ids) this.add(id);
  }

  /** `id` joined, or came back: as it left, if we kept its record, else fresh (a member: as it is). */
  add(id: NodeId): void {
    if (this.peers.has(id)) return;
    const kept = this.departed.get(id);
    this.departed.delete(id);
    this.peers.set(id, kept?.record ?? freshTrust(this.config.openMs));
    if (this.caught.has(id)) this.quarantine(id);
  }

  /** `id` left the membership at `now`: its record is kept (bounded) for its return. */
  remove(id: NodeId, now: number): void {
    const t = this.peers.get(id);
    if (t === undefined) return;
    this.peers.delete(id);
    // Its open attempts fail over as lost (neutral): none is open when it returns.
    t.open.clear();
    t.unanswered = 0;
    t.probe = undefined;
    this.departed.set(id, { record: t, at: now });
    if (this.departed.size > MAX_DEPARTED) this.departed.delete(this.departed.keys().next().value as NodeId);
    invariant(this.departed.size <= MAX_DEPARTED, "trust: departed peers kept beyond the bound");
  }

  /**
   * `id` was seen in a newer epoch: another process, by its own claim. Epochs are self-reported, so a
   * staller could claim one at will: a restart clears only what a restart ends — a back-off for load
   * (its queue went) and the proof of its old process (probation starts over) — never the breaker,
   * score, failure history or quarantine that its answers earned. One rule for every path that sees
   * a restart, member or not (mesh.ts, node.ts). Its probation starts over as a breaker opening starts
   * it: the old process's failed attempts leave its count (they stay in its streak and window), or a
   * closed breaker with as many of them as `maxUnanswered` would never be sent the forward that
   * either proves the new process or opens the breaker.
   */
  restarted(id: NodeId): void {
    const t = this.peers.get(id) ?? this.departed.get(id)?.record;
    if (t === undefined) return;
    t.busyUntil = 0;
    t.busyMs = 0;
    t.proven = false;
    t.failedSince = 0;
  }

  /** Whether `id`'s answers were found wrong (spot checks): none of its answers is taken. */
  quarantined(id: NodeId): boolean {
    return this.peers.get(id)?.state === "quarantined";
  }

  /** May a forward go to `id` now? (Read-only: `sent` takes the half-open probe.) */
  routable(id: NodeId, now: number): boolean {
    const t = this.peers.get(id);
    if (!this.config.enabled || t === undefined) return true;
    if (now < t.busyUntil) return false;
    switch (t.state) {
      case "quarantined":
        return false;
      case "closed":
        return true;
      case "open":
        return now >= t.openUntil;
      case "half-open":
        return t.probe === undefined;
    }
  }

  /**
   * May `id` be sent one more forward now, as far as its probation goes? Asked apart from `routable`
   * (node.ts: when a forward or an offload is about to go), so a peer held to its window still ranks
   * as a candidate and only the forward it would have taken goes elsewhere.
   */
  mayHold(id: NodeId): boolean {
    const t = this.peers.get(id);
    if (!this.config.enabled || t === undefined || t.proven || this.config.maxUnanswered === 0) return true;
    return t.unanswered + t.failedSince < this.config.maxUnanswered;
  }

  /**
   * Our forward attempt `attempt` (unique among ours) went to `id`: it is open until `answered` or
   * `ended`. An open breaker past its period half-opens, and this is its probe.
   */
  sent(id: NodeId, attempt: string, now: number): void {
    const t = this.peers.get(id);
    // Off, no attempt is held open: nobody asks for probation (`mayHold`) or a half-open probe.
    if (t === undefined || !this.config.enabled) return;
    if (t.open.has(attempt)) this.ended(id, attempt);
    t.open.set(attempt, { stamp: t.answers, failed: false });
    t.unanswered++;
    if (t.open.size > MAX_OPEN_ATTEMPTS) this.ended(id, t.open.keys().next().value as string);
    if (t.state === "quarantined") return;
    if (t.state === "open" && now >= t.openUntil) t.state = "half-open";
    if (t.state === "half-open" && t.probe === undefined) t.probe = attempt;
  }

  /** Whether our attempt `attempt` is `id`'s half-open probe. */
  isProbe(id: NodeId, attempt: string): boolean {
    return this.peers.get(id)?.probe === attempt;
  }

  /**
   * A result from `id` for an attempt of ours we had moved on from: no success for the breaker, but
   * progress — it answers, so what we sent before this is not held as unanswered.
   */
  progressed(id: NodeId): void {
    const t = this.peers.get(id);
    // Off: probation is not kept (`sent` holds no attempt open).
    if (t === undefined || !this.config.enabled) return;
    t.answers++;
    t.unanswered = 0;
    t.failedSince = 0;
    if (t.state !== "open") t.proven = true;
  }

  /** The attempt `attempt` to `id` was answered (it ends). */
  answered(id: NodeId, attempt: string): void {
    const t = this.peers.get(id);
    if (t === undefined) return;
    this.ended(id, attempt);
    this.progressed(id);
    t.score += SCORE_ALPHA * (1 - t.score);
    t.streak = 0;
    t.busyMs = 0;
    if (t.state === "quarantined") return;
    if (t.state === "half-open") {
      t.state = "closed";
      t.openMs = this.config.openMs;
      t.recent.length = 0;
    }
  }

  /** The attempt `attempt` to `id` was answered late (see the file's comment): it fails, and ends. */
  answeredLate(id: NodeId, attempt: string, now: number): void {
    this.late(id, attempt, now);
    this.ended(id, attempt);
    this.progressed(id);
  }

  /**
   * The attempt `attempt` to `id` is over past its first deadline (see the file's comment): it fails,
   * as that deadline would have failed it, counted apart (`late`). Once: an attempt that failed is
   * not marked again.
   */
  late(id: NodeId, attempt: string, now: number): void {
    const t = this.peers.get(id);
    if (t === undefined || t.open.get(attempt)?.failed === true) return;
    t.late++;
    this.failed(id, attempt, now);
  }

  /**
   * The attempt `attempt` to `id` failed (see the file's comment for what counts; it stays open until
   * `ended`). While half-open only the probe's failure reopens the breaker: an older attempt failing
   * then says nothing of the peer since it was reopened to a probe.
   */
  failed(id: NodeId, attempt: string, now: number): void {
    const t = this.peers.get(id);
    if (t === undefined) return;
    t.failures++;
    t.streak++;
    t.score -= SCORE_ALPHA * t.score;
    const a = t.open.get(attempt);
    if (a !== undefined && !a.failed) {
      a.failed = true;
      if (a.stamp === t.answers) {
        t.unanswered--;
        t.failedSince++;
      }
    }
    if (t.state === "quarantined") return;
    if (t.state === "half-open") {
      if (t.probe !== attempt) return;
      t.probe = undefined;
      t.openMs = Math.min(this.config.maxOpenMs, 2 * t.openMs);
      this.open(t, now);
      return;
    }
    t.recent.push(now);
    while (t.recent.length > 0 && (t.recent[0] as number) <= now - this.config.windowMs) t.recent.shift();
    if (t.recent.length > this.config.failures) t.recent.shift();
    // `failures` within the window, or in a row with no answer between them however far apart: a
    // peer that never answers (a staller sent little) is demoted as fast as a busy route to it.
    const many = t.recent.length >= this.config.failures || t.streak >= this.config.failures;
    if (t.state === "closed" && many) this.open(t, now);
  }

  /** A spot check caught `id` answering wrongly: never routed to again (until our restart). */
  quarantine(id: NodeId): void {
    // Noted even for a peer out of the membership now: a check is judged when our queue empties, by
    // which time the peer it caught may have left (declared dead, say), and it is quarantined on its
    // return. Newest caught last: the bound forgets the oldest first.
    this.caught.delete(id);
    this.caught.add(id);
    if (this.caught.size > MAX_QUARANTINED) this.caught.delete(this.caught.values().next().value as NodeId);
    invariant(this.caught.size <= MAX_QUARANTINED, "trust: quarantined peers kept beyond the bound");
    const t = this.peers.get(id);
    if (t === undefined) return;
    t.state = "quarantined";
    t.score = 0;
    t.probe = undefined;
  }

  /** `id` refused the attempt for load: a back-off, no mark (the attempt ends with `ended`). */
  refused(id: NodeId, now: number): void {
    const t = this.peers.get(id);
    if (t === undefined) return;
    t.refusals++;
    t.busyMs = Math.min(this.config.maxOpenMs, t.busyMs === 0 ? BUSY_BACKOFF_MS : 2 * t.busyMs);
    t.busyUntil = now + t.busyMs;
  }

  /**
   * The attempt `attempt` to `id` is over, whatever ended it (after its outcome, if it had one): no
   * longer open, and a half-open probe it was is freed.
   */
  ended(id: NodeId, attempt: string): void {
    const t = this.peers.get(id);
    if (t === undefined) return;
    const a = t.open.get(attempt);
    if (a === undefined) return;
    t.open.delete(attempt);
    if (a.stamp === t.answers && !a.failed) t.unanswered--;
    invariant(t.unanswered >= 0, "trust: more attempts ended than were sent since the last answer");
    if (t.probe === attempt) t.probe = undefined;
  }

  view(id: NodeId): TrustView | undefined {
    const t = this.peers.get(id);
    return t === undefined ? undefined : viewOf(t);
  }

  /**
   * The records kept of peers out of the membership (what each will come back with), the last gone
   * first, at most `limit` of them; `total`: how many are kept. One caught while out shows quarantined,
   * as it will be on its return.
   */
  departedViews(now: number, limit: number): { total: number; peers: DepartedTrustView[] } {
    const all = [...this.departed];
    const peers: DepartedTrustView[] = [];
    for (let i = all.length - 1; i >= 0 && peers.length < limit; i--) {
      const [id, { record, at }] = all[i] as [NodeId, { record: PeerTrust; at: number }];
      const trust = viewOf(record);
      if (this.caught.has(id)) {
        trust.state = "quarantined";
        trust.score = 0;
      }
      peers.push({ id, trust, goneForMs: Math.max(0, now - at) });
    }
    return { total: all.length, peers };
  }

  private open(t: PeerTrust, now: number): void {
    t.state = "open";
    t.openUntil = now + t.openMs;
    t.opened++;
    t.recent.length = 0;
    t.streak = 0;
    t.proven = false;
    // The breaker holds the peer back now; its half-open probe starts a fresh count.
    t.failedSince = 0;
  }
}
