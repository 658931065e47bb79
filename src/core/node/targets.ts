/**
 * What the origin knows of each peer as the target of its forwards: the measured RTT (forwards, and
 * the anti-entropy echo node.ts feeds in), the forwards sent since it last reported its queue, and
 * whether it acks forwards at all. Part of the origin role (origin.ts), kept apart for size.
 */
import { SortedValues } from "../sorted-values.js";
import type { NodeId, PeerView } from "./types.js";

/** A peer is taken for one that does not ack after this many answers to unacked attempts in a row. */
const MISSED_ACKS_TO_EXEMPT = 3;
/** Attempts abandoned for want of an ack, remembered to notice a peer that answers but never acks. */
const MAX_UNACKED_ABANDONED = 256;
/** Forwards in flight remembered per peer (the oldest is forgotten beyond: a bound, not a limit). */
const MAX_IN_FLIGHT = 1024;

export interface Target {
  /** Smoothed measured RTT, ms (undefined until measured). */
  rttMs: number | undefined;
  /** The last rare (probe) sample, ms: a rise needs two high ones in a row (smoothRareRtt). */
  lastRareMs: number | undefined;
  /**
   * Forwards to it must be acked in time. True until it answers several forwards whose ack never came
   * (a peer that does not ack, e.g. an older version); any ack from it sets it again.
   */
  acksForwards: boolean;
  /** Answers in a row to attempts we had abandoned for want of an ack, with no ack in between. */
  missedAcks: number;
  /** Forwards we sent it since it last reported its queue depth. */
  sentSinceQueue: number;
  /**
   * Our forwards it has not acked or answered yet (attempt → when sent): on their way, so in no
   * queue depth it reported — every report it sends after one arrives counts it (its ack included).
   */
  inFlight: Map<string, number>;
  /** What its answers showed of its engine's speed (undefined until one came). */
  observed: ObservedPrefill | undefined;
}

/**
 * A peer's prefill as its answers showed it: moving means of its prefill time and of the uncached
 * tokens behind it. Prefill is linear in uncached tokens, so our own fit at `uncached` against
 * `prefillMs` says how much slower or faster than us it is (cost-aware's `peerSpeed`).
 */
export interface ObservedPrefill {
  prefillMs: number;
  uncached: number;
  samples: number;
}

/** Weight of a new answer in a peer's observed prefill (an effective memory of ~10 answers). */
const OBSERVED_ALPHA = 0.1;

/**
 * Exponentially weighted RTT: up slowly (α = 1/8, as TCP's SRTT), down fast (α = 1/2). A
 * connection's first samples carry one-off costs (TCP and TLS set-up), which at 1/8 took dozens of
 * rounds to fade and kept cost-aware routing from forwarding to a near peer for a fresh cluster's
 * first seconds (BENCHMARKS.md, "Node daemon"); brief spikes still move the estimate little.
 */
export function smoothRtt(prev: number | undefined, sampleMs: number): number {
  const v = Math.max(0, sampleMs);
  if (prev === undefined) return v;
  return prev + (v - prev) / (v < prev ? 2 : 8);
}

/**
 * The same for rare samples (SWIM's direct probes: each member once per N probe periods). A probe's
 * round trip is two mesh messages through both event loops, the first ones also setting up their
 * connections (TLS both ways); averaged like frequent samples, one slow probe priced a near member
 * as far for seconds. So a lower sample replaces the estimate at once, and the estimate rises (by
 * 1/8) only to the lower of this sample and the one before: one slow probe moves nothing.
 */
export function smoothRareRtt(prev: number | undefined, sampleMs: number, lastSampleMs?: number): number {
  const v = Math.max(0, sampleMs);
  if (prev === undefined || v < prev) return v;
  const up = Math.min(v, lastSampleMs ?? v);
  return up > prev ? prev + (up - prev) / 8 : prev;
}

export class Targets {
  private readonly peers = new Map<NodeId, Target>();
  /** The peers' measured RTTs, in order (`typicalRttMs` is their median). */
  private readonly rtts = new SortedValues();
  /** Our attempts abandoned for want of an ack, by reqId + attempt → the peer (bounded). */
  private readonly unackedAbandoned = new Map<string, NodeId>();

  reset(ids: readonly NodeId[]): void {
    this.peers.clear();
    this.rtts.clear();
    this.unackedAbandoned.clear();
    for (const id of ids) this.add(id);
  }

  add(id: NodeId): void {
    this.forgetRtt(id);
    this.peers.set(id, {
      rttMs: undefined,
      lastRareMs: undefined,
      acksForwards: true,
      missedAcks: 0,
      sentSinceQueue: 0,
      inFlight: new Map(),
      observed: undefined,
    });
  }

  remove(id: NodeId): void {
    this.forgetRtt(id);
    this.peers.delete(id);
  }

  private forgetRtt(id: NodeId): void {
    const rtt = this.peers.get(id)?.rttMs;
    if (rtt !== undefined) this.rtts.delete(rtt);
  }

  get(id: NodeId): Target | undefined {
    return this.peers.get(id);
  }

  /** Its part of the peer's `PeerView`. */
  view(id: NodeId): Pick<PeerView, "rttMs" | "acksForwards"> {
    return { rttMs: this.rttMs(id), acksForwards: this.acksForwards(id) };
  }

  rttMs(id: NodeId): number | undefined {
    return this.peers.get(id)?.rttMs;
  }

  acksForwards(id: NodeId): boolean {
    return this.peers.get(id)?.acksForwards ?? true;
  }

  sentSinceQueue(id: NodeId): number {
    return this.peers.get(id)?.sentSinceQueue ?? 0;
  }

  /** A forward attempt left for it. */
  sent(id: NodeId, reqId: string, attempt: number, now: number): void {
    const t = this.peers.get(id);
    if (!t) return;
    t.sentSinceQueue++;
    t.inFlight.set(attemptKey(reqId, attempt), now);
    if (t.inFlight.size > MAX_IN_FLIGHT) t.inFlight.delete(t.inFlight.keys().next().value as string);
  }

  /** The attempt reached it (acked or answered) or we gave up on it: no longer in flight. */
  landed(id: NodeId, reqId: string, attempt: number): void {
    this.peers.get(id)?.inFlight.delete(attemptKey(reqId, attempt));
  }

  /**
   * Our forwards still on their way to it: sent within `maxAgeMs` (an attempt neither acked nor
   * answered by then is abandoned or lost, and counts no more) and not yet acked or answered.
   */
  inFlightTo(id: NodeId, now: number, maxAgeMs: number): number {
    const t = this.peers.get(id);
    if (!t) return 0;
    // Oldest first (insertion order): drop the expired from the front.
    for (const [k, at] of t.inFlight) {
      if (now - at <= maxAgeMs) break;
      t.inFlight.delete(k);
    }
    return t.inFlight.size;
  }

  /** An answer from it: its engine took `prefillMs` for `uncached` prompt tokens. */
  samplePrefill(id: NodeId, prefillMs: number, uncached: number): void {
    const t = this.peers.get(id);
    if (
      !t ||
      !(prefillMs >= 0 && Number.isFinite(prefillMs)) ||
      !(uncached >= 0 && Number.isFinite(uncached))
    )
      return;
    const o = t.observed;
    if (!o) t.observed = { prefillMs, uncached, samples: 1 };
    else {
      o.prefillMs += (prefillMs - o.prefillMs) * OBSERVED_ALPHA;
      o.uncached += (uncached - o.uncached) * OBSERVED_ALPHA;
      o.samples++;
    }
  }

  observed(id: NodeId): Readonly<ObservedPrefill> | undefined {
    return this.peers.get(id)?.observed;
  }

  /** A round-trip sample; `rare`: from a source that samples each peer seldom (smoothRareRtt). */
  sampleRtt(id: NodeId, ms: number, rare = false): void {
    const t = this.peers.get(id);
    if (!t) return;
    if (t.rttMs !== undefined) this.rtts.delete(t.rttMs);
    if (rare) {
      t.rttMs = smoothRareRtt(t.rttMs, ms, t.lastRareMs);
      t.lastRareMs = Math.max(0, ms);
    } else t.rttMs = smoothRtt(t.rttMs, ms);
    this.rtts.add(t.rttMs);
  }

  /**
   * The median RTT over the peers measured so far (undefined: none yet): what a peer not measured
   * yet is expected to cost, where most peers are unmeasured most of the time (gossip "scuttlebutt"
   * talks to a few members per round, not to all). Read on every forward: the RTTs are kept in
   * order as samples come, not sorted per read.
   */
  typicalRttMs(): number | undefined {
    return this.rtts.median();
  }

  /** It reported its queue depth: what we sent it before is counted in there. */
  loadReported(id: NodeId): void {
    const t = this.peers.get(id);
    if (t) t.sentSinceQueue = 0;
  }

  /** Any ack from it: it acks (so its forwards are held to the ack timeout). */
  acked(id: NodeId, reqId: string, attempt: number): void {
    const t = this.peers.get(id);
    if (t) {
      t.acksForwards = true;
      t.missedAcks = 0;
      t.inFlight.delete(attemptKey(reqId, attempt));
    }
    this.unackedAbandoned.delete(attemptKey(reqId, attempt));
  }

  /** We abandoned this attempt, never acked: remembered, to notice a peer that answers but never acks. */
  abandonedUnacked(id: NodeId, reqId: string, attempt: number): void {
    this.unackedAbandoned.set(attemptKey(reqId, attempt), id);
    if (this.unackedAbandoned.size > MAX_UNACKED_ABANDONED) {
      this.unackedAbandoned.delete(this.unackedAbandoned.keys().next().value as string);
    }
  }

  /**
   * An answer for an attempt we had moved on from. If we had abandoned it for want of an ack, the
   * peer got it but did not ack: after a few such in a row (no ack in between) we stop requiring its
   * acks, so a peer that never acks (an older version) is not penalised on every forward.
   */
  lateAnswer(id: NodeId, reqId: string, attempt: number): void {
    const key = attemptKey(reqId, attempt);
    if (this.unackedAbandoned.get(key) !== id) return;
    this.unackedAbandoned.delete(key);
    const t = this.peers.get(id);
    if (t && ++t.missedAcks >= MISSED_ACKS_TO_EXEMPT) t.acksForwards = false;
  }
}

/** Identifies one of our own attempts. */
function attemptKey(reqId: string, attempt: number): string {
  return `${reqId}\u0000${attempt}`;
}
