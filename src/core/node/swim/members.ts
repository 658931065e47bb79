/**
 * SWIM's member table (owned by one Swim, swim.ts): what this node believes of each verified member,
 * the live list, and Lifeguard's suspicion timing. `setStatus` is the one door for status changes,
 * so the live list, the suspects and the tombstones never disagree with the beliefs, and every
 * change is said once (member-up/-down effect, `observe`).
 */
import { invariant } from "../../invariant.js";
import { type SwimConfig, suspicionMinMs } from "./config.js";
import type { MemberStatus, NodeId, SwimEffect } from "./types.js";

export interface Member {
  id: NodeId;
  status: MemberStatus;
  incarnation: number;
  /** When the status last changed (our clock): tombstones expire from here. */
  changedAt: number;
  suspicion: Suspicion | undefined;
  /**
   * Dead to this node alone: its new life failed our check while others held it live (admissions.ts).
   * Not a death at its incarnation: never said, its word not taken (even once its refusal, bounded, is
   * forgotten), and a check that passes revives it there; cleared once live again.
   */
  putOut?: boolean;
}

export interface Suspicion {
  startedAt: number;
  minMs: number;
  maxMs: number;
  /**
   * Independent suspecters (Lifeguard): the timeout shrinks toward minMs as they reach `k`. The
   * source is never one: its own news comes back to us in gossip, and counting it would shorten a
   * suspicion nobody else shares.
   */
  confirmers: Set<NodeId>;
  k: number;
  /** Who raised it (undefined: not said); ourselves means our later failed probes are not independent. */
  source: NodeId | undefined;
}

/** A dead or departed member still remembered (`deadRetainMs`), and how long ago it went. */
export interface FormerMember {
  id: NodeId;
  status: "dead" | "left";
  goneForMs: number;
}

export class MemberTable {
  private readonly byId = new Map<NodeId, Member>();
  /** Alive and suspect members, for O(1) random picks (swap-remove). */
  private readonly liveList: NodeId[] = [];
  private readonly liveAt = new Map<NodeId, number>();
  private readonly suspects = new Set<NodeId>();
  private readonly tombstones = new Set<NodeId>();
  /** Moves on every status change: a view built from the table is current while this stands. */
  version = 0;

  constructor(
    private readonly selfId: NodeId,
    private readonly config: SwimConfig,
    private readonly random: () => number,
    private readonly observe?: (id: NodeId, from: MemberStatus | undefined, to: MemberStatus) => void,
  ) {}

  get(id: NodeId): Member | undefined {
    return this.byId.get(id);
  }
  has(id: NodeId): boolean {
    return this.byId.has(id);
  }
  get size(): number {
    return this.byId.size;
  }
  values(): IterableIterator<Member> {
    return this.byId.values();
  }
  /** Dead and departed members still remembered, in table order (swim.ts `formerMembers`). */
  former(now: number): FormerMember[] {
    const out: FormerMember[] = [];
    for (const m of this.byId.values())
      if (m.status === "dead" || m.status === "left")
        out.push({ id: m.id, status: m.status, goneForMs: Math.max(0, now - m.changedAt) });
    return out;
  }
  /** Alive and suspect members, excluding ourselves. */
  get live(): readonly NodeId[] {
    return this.liveList;
  }
  isLive(id: NodeId): boolean {
    return this.liveAt.has(id);
  }

  /** A newly verified member, alive at `incarnation`. */
  add(id: NodeId, incarnation: number, now: number, out: SwimEffect[]): void {
    const m: Member = { id, status: "dead", incarnation, changedAt: now, suspicion: undefined };
    this.byId.set(id, m);
    this.setStatus(m, "alive", now, out);
  }

  /** Suspects whose Lifeguard timeout has run out (lazily: the caller may change the table between). */
  *expiredSuspects(now: number): Generator<Member> {
    for (const id of this.suspects) {
      const m = this.byId.get(id) as Member;
      const s = m.suspicion as Suspicion;
      if (now - s.startedAt >= suspicionTimeout(s)) yield m;
    }
  }

  /** A remembered dead or left member, at random (none: no random draw). */
  randomTombstone(): Member | undefined {
    if (this.tombstones.size === 0) return undefined;
    let i = Math.floor(this.random() * this.tombstones.size);
    for (const id of this.tombstones) if (i-- <= 0) return this.byId.get(id);
    return undefined;
  }

  /** Forgets dead and left members remembered longer than `retainMs`. */
  dropTombstones(now: number, retainMs: number): void {
    for (const id of this.tombstones) {
      const m = this.byId.get(id) as Member;
      if (now - m.changedAt < retainMs) continue;
      this.tombstones.delete(id);
      this.byId.delete(id);
    }
    invariant(this.liveList.length === this.liveAt.size, "swim live list and index disagree");
  }

  /** Starts a suspicion of `m`; the cluster's size (live members and ourselves) sets its timeout and k. */
  suspect(m: Member, from: NodeId | undefined, now: number, out: SwimEffect[]): void {
    this.setStatus(m, "suspect", now, out);
    const n = this.liveList.length + 1;
    const minMs = suspicionMinMs(this.config, n);
    const k = Math.max(0, this.config.suspicionMult - 2);
    m.suspicion = {
      startedAt: now,
      minMs,
      maxMs: this.config.suspicionMaxTimeoutMult * minMs,
      confirmers: new Set(),
      // As memberlist: too few others (less ourselves and the suspect) to ever give k, expect none.
      k: n - 2 < k ? 0 : k,
      source: from,
    };
  }

  /**
   * An independent suspicion of a suspect we already hold; true if it is new (then re-gossiped). Each
   * member counts once, its source never; we count ourselves only for a failed probe of our own
   * (`own`; memberlist's probeNode → suspectNode), never for news naming us as its source.
   */
  confirm(m: Member, from: NodeId, own = false): boolean {
    const s = m.suspicion;
    if (s === undefined || s.confirmers.has(from) || from === s.source) return false;
    if (from === this.selfId && !own) return false;
    if (s.confirmers.size >= s.k) return false;
    s.confirmers.add(from);
    return true;
  }

  setStatus(m: Member, status: MemberStatus, now: number, out: SwimEffect[]): void {
    const was = m.status;
    if (was === status) return;
    this.version++;
    m.status = status;
    m.changedAt = now;
    this.observe?.(m.id, was, status);
    const wasLive = was === "alive" || was === "suspect";
    const isLive = status === "alive" || status === "suspect";
    if (status !== "suspect") {
      m.suspicion = undefined;
      this.suspects.delete(m.id);
    } else this.suspects.add(m.id);
    if (wasLive && !isLive) {
      this.removeLive(m.id);
      this.tombstones.add(m.id);
      out.push({ type: "member-down", id: m.id, reason: status === "left" ? "left" : "dead" });
    } else if (!wasLive && isLive) {
      m.putOut = undefined;
      this.tombstones.delete(m.id);
      this.addLive(m.id);
      out.push({ type: "member-up", id: m.id });
    }
  }

  /** Up to `k` distinct random live members passing `ok`. */
  pick(k: number, ok: (id: NodeId) => boolean): NodeId[] {
    const out: NodeId[] = [];
    const live = this.liveList;
    const n = live.length;
    if (n === 0 || k === 0) return out;
    // Few members: scan a shuffled copy; many: sample with retries (k ≪ n).
    if (n <= 4 * k) {
      for (const id of shuffle([...live], this.random)) {
        if (out.length >= k) break;
        if (ok(id)) out.push(id);
      }
      return out;
    }
    for (let tries = 0; tries < 4 * k && out.length < k; tries++) {
      const id = live[Math.floor(this.random() * n)] as NodeId;
      if (ok(id) && !out.includes(id)) out.push(id);
    }
    return out;
  }

  private addLive(id: NodeId): void {
    if (this.liveAt.has(id)) return;
    this.liveAt.set(id, this.liveList.length);
    this.liveList.push(id);
  }

  private removeLive(id: NodeId): void {
    const i = this.liveAt.get(id);
    if (i === undefined) return;
    const last = this.liveList.pop() as NodeId;
    if (last !== id) {
      this.liveList[i] = last;
      this.liveAt.set(last, i);
    }
    this.liveAt.delete(id);
  }
}

/** Lifeguard's dynamic suspicion timeout: max → min as confirmations reach k. */
function suspicionTimeout(s: Suspicion): number {
  if (s.k < 1) return s.minMs;
  const frac = Math.log(s.confirmers.size + 1) / Math.log(s.k + 1);
  return Math.max(s.minMs, Math.floor(s.maxMs - frac * (s.maxMs - s.minMs)));
}

export function shuffle<T>(a: T[], random: () => number): T[] {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const t = a[i] as T;
    a[i] = a[j] as T;
    a[j] = t;
  }
  return a;
}
