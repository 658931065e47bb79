/**
 * Peer trust (beyond the paper's crash-only model, advisory like every estimate): what this node,
 * as an origin, has seen of each peer's answers to its forwards, and a circuit breaker over it.
 *
 * Outcomes of a forward attempt:
 *  - answered → a success (a half-open breaker closes);
 *  - failed → acked but not answered by its expected time plus slack, an error that is no refusal
 *    for load, or the forward timeout: the score falls, and `failures` of them within `windowMs`,
 *    or in a row without an answer between them, open the breaker (SGLang's gateway opens after
 *    10 in 120 s: a stalled forward costs a client seconds, so a few suffice);
 *  - refused for load (overloaded, a deadline it cannot meet, busy) → no mark against the peer,
 *    only a back-off that doubles while refusals continue: being busy is honest, and push-back
 *    already says so;
 *  - anything else (unreachable, departed, restarted, our own cancel) → neutral: liveness and
 *    membership handle those.
 * Breaker: closed → open (not routable for `openMs`) → half-open (one forward may probe) → closed on
 * its success, or open again for twice as long (at most `maxOpenMs`) on its failure.
 *
 * Part of the origin role (origin.ts reports outcomes; node.ts asks `routable`). Pure: time comes in.
 */
import { invariant } from "../invariant.js";
import type { BreakerState, NodeId, TrustView } from "./types.js";

export type { BreakerState, TrustView } from "./types.js";

export interface TrustConfig {
  enabled: boolean;
  /** Failures within `windowMs` that open the breaker. */
  failures: number;
  windowMs: number;
  /** First open period, ms (doubles per failed half-open probe, up to `maxOpenMs`). */
  openMs: number;
  maxOpenMs: number;
}

/** Weight of the newest outcome in the score. */
const SCORE_ALPHA = 0.25;
/** First back-off after a load refusal, ms (doubles per refusal in a row, up to `maxOpenMs`). */
const BUSY_BACKOFF_MS = 250;

interface PeerTrust {
  score: number;
  state: BreakerState;
  /** Times of the recent failures (at most `failures` kept). */
  recent: number[];
  /** Failures since its last answer, however far apart. */
  streak: number;
  openUntil: number;
  openMs: number;
  /** A half-open probe is out. */
  probing: boolean;
  busyUntil: number;
  busyMs: number;
  failures: number;
  refusals: number;
  opened: number;
}

/**
 * Errors a peer answers when it is busy, not broken: its serving role's overload and deadline
 * refusals, a transport's 429 or push-back, a drain on shutdown.
 */
const LOAD_REFUSAL = /^(overloaded|deadline|shutting down)|\b(busy|429|push-back|too many requests)\b/i;

/** Whether a peer's error is a refusal for load (no mark against it). */
export function isLoadRefusal(error: string): boolean {
  return LOAD_REFUSAL.test(error);
}

export class Trust {
  private readonly peers = new Map<NodeId, PeerTrust>();

  constructor(private readonly config: TrustConfig) {
    invariant(config.failures >= 1 && config.openMs > 0, "trust: failures ≥ 1 and openMs > 0");
  }

  get enabled(): boolean {
    return this.config.enabled;
  }

  reset(ids: readonly NodeId[]): void {
    this.peers.clear();
    for (const id of ids) this.add(id);
  }

  add(id: NodeId): void {
    this.peers.set(id, {
      score: 1,
      state: "closed",
      recent: [],
      streak: 0,
      openUntil: 0,
      openMs: this.config.openMs,
      probing: false,
      busyUntil: 0,
      busyMs: 0,
      failures: 0,
      refusals: 0,
      opened: 0,
    });
  }

  remove(id: NodeId): void {
    this.peers.delete(id);
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
        return !t.probing;
    }
  }

  /** A forward attempt went to `id`: an open breaker past its period half-opens, and this is its probe. */
  sent(id: NodeId, now: number): void {
    const t = this.peers.get(id);
    if (!this.config.enabled || t === undefined || t.state === "quarantined") return;
    if (t.state === "open" && now >= t.openUntil) t.state = "half-open";
    if (t.state === "half-open") t.probing = true;
  }

  /** The attempt to `id` was answered. */
  answered(id: NodeId): void {
    const t = this.peers.get(id);
    if (t === undefined) return;
    t.score += SCORE_ALPHA * (1 - t.score);
    t.streak = 0;
    t.busyMs = 0;
    t.probing = false;
    if (t.state === "quarantined") return;
    if (t.state === "half-open") {
      t.state = "closed";
      t.openMs = this.config.openMs;
      t.recent.length = 0;
    }
  }

  /** The attempt to `id` failed (see the file's comment for what counts). */
  failed(id: NodeId, now: number): void {
    const t = this.peers.get(id);
    if (t === undefined) return;
    t.failures++;
    t.streak++;
    t.score -= SCORE_ALPHA * t.score;
    t.probing = false;
    if (t.state === "quarantined") return;
    if (t.state === "half-open") {
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
    const t = this.peers.get(id);
    if (t === undefined) return;
    t.state = "quarantined";
    t.score = 0;
    t.probing = false;
  }

  /** `id` refused the attempt for load: a back-off, no mark. */
  refused(id: NodeId, now: number): void {
    const t = this.peers.get(id);
    if (t === undefined) return;
    t.refusals++;
    t.probing = false;
    t.busyMs = Math.min(this.config.maxOpenMs, t.busyMs === 0 ? BUSY_BACKOFF_MS : 2 * t.busyMs);
    t.busyUntil = now + t.busyMs;
  }

  /** The attempt to `id` ended otherwise (unreachable, departed, cancelled): no outcome, probe freed. */
  released(id: NodeId): void {
    const t = this.peers.get(id);
    if (t) t.probing = false;
  }

  view(id: NodeId): TrustView | undefined {
    const t = this.peers.get(id);
    if (t === undefined) return undefined;
    return { score: t.score, state: t.state, failures: t.failures, refusals: t.refusals, opened: t.opened };
  }

  private open(t: PeerTrust, now: number): void {
    t.state = "open";
    t.openUntil = now + t.openMs;
    t.opened++;
    t.recent.length = 0;
    t.streak = 0;
  }
}
