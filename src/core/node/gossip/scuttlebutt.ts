/**
 * Scuttlebutt anti-entropy (van Renesse et al. 2008) for the peer estimates of §3.4: each round a node
 * sends a digest — (owner, epoch, version) of every owner it holds, itself included — to `fanout`
 * random members; the receiver answers with the states the initiator lacks and the owners it lacks
 * itself ("wants"), which the initiator then sends. Any node sends any owner's state (relay): safe
 * because each estimate has one writer and (epoch, version) only moves forward (Estimates), so a
 * relayed state older than what the receiver holds is ignored.
 *
 * How a relay carries another owner's change: it keeps the last `deltaLog` deltas it applied for that
 * owner, consecutive, and sends the chain from the receiver's version; a receiver further behind (or
 * of another epoch) gets the owner's whole key set — from our estimate, and only while that estimate
 * is exactly the owner's (no optimistic insert since: `clean`), else nothing (the owner or a cleaner
 * relay sends it). Cost: the log holds at most deltaLog × the keys of those deltas per owner; a chain
 * costs the sum of its deltas, a fallback 6 bytes per key of the owner's tree.
 *
 * `maxEstimates` bounds the owners held: a new owner is taken while there is room; when full, one in
 * `discoveryOdds` arrivals replaces the least useful held owner (the node scores usefulness: recent
 * matches for its traffic, RTT), so new specialists are still discovered.
 */
import { Estimates } from "../../estimates.js";
import { invariant } from "../../invariant.js";
import type { PeerIndex } from "../../peer-index.js";
import type { Snapshot, SnapshotBody, SnapshotDelta, SnapshotHeader } from "../../snapshot.js";
import type { NodeId } from "../types.js";

/** One owner in a digest: which (epoch, version) of its tree the digest's sender holds. */
export interface DigestEntry {
  owner: NodeId;
  epoch: number;
  version: number;
}

export type GossipMessage =
  /** Round start: what I hold; `room`: I take owners I do not hold yet. */
  | { type: "digest"; entries: DigestEntry[]; room: boolean }
  /** States the receiver lacks (deltas of one owner in order), and (answering a digest) what I lack. */
  | { type: "states"; states: Snapshot[]; wants: DigestEntry[] };

/** Our own tree as the gossip needs it (RadixTree satisfies it; headers carry our load). */
export interface OwnState {
  header(): SnapshotHeader;
  changesSince(version: number): SnapshotDelta | undefined;
  snapshotBody(): SnapshotBody;
}

export interface ScuttlebuttConfig {
  fanout: number;
  /** Deltas kept per relayed owner. */
  deltaLog: number;
  /** Owners held at most (besides ourselves); Infinity = all. */
  maxEstimates: number;
  /** Most states in one message (a peer-controlled count on receipt). */
  maxStates: number;
  /** Most digest entries accepted in one message. */
  maxDigest: number;
  /** When full, one in this many arriving owners replaces the least useful one. */
  discoveryOdds: number;
}

export const DEFAULT_SCUTTLEBUTT: ScuttlebuttConfig = {
  fanout: 3,
  deltaLog: 16,
  maxEstimates: Number.POSITIVE_INFINITY,
  maxStates: 256,
  maxDigest: 8_192,
  discoveryOdds: 8,
};

interface OwnerLog {
  /** The header of the newest state we applied (its load figures and tokenCount). */
  header: SnapshotHeader;
  /** Consecutive deltas, oldest first, ending at header.version. */
  deltas: SnapshotDelta[];
  /** Our estimate is exactly the owner's tree at header.version (no optimistic insert since). */
  clean: boolean;
}

export interface ScuttlebuttCounters {
  digestsSent: number;
  statesSent: { full: number; delta: number };
  statesReceived: { applied: number; stale: number; duplicate: number; needFull: number; dropped: number };
  invalid: number;
}

export interface ScuttlebuttDeps {
  random(): number;
  /** Whether `owner` is a live member now (states of others are dropped); default: all are. */
  member?(owner: NodeId): boolean;
  /** Usefulness of a held owner (higher keeps it); default 0 for all. */
  score?(owner: NodeId): number;
}

export class Scuttlebutt {
  readonly estimates: Estimates;
  private readonly logs = new Map<NodeId, OwnerLog>();
  readonly counters: ScuttlebuttCounters = {
    digestsSent: 0,
    statesSent: { full: 0, delta: 0 },
    statesReceived: { applied: 0, stale: 0, duplicate: 0, needFull: 0, dropped: 0 },
    invalid: 0,
  };

  constructor(
    private readonly selfId: NodeId,
    readonly index: PeerIndex,
    private readonly deps: ScuttlebuttDeps,
    private readonly config: ScuttlebuttConfig = DEFAULT_SCUTTLEBUTT,
  ) {
    this.estimates = new Estimates(index);
  }

  /** Owners we hold an estimate of (not ourselves). */
  owners(): IterableIterator<NodeId> {
    return this.logs.keys();
  }
  holds(owner: NodeId): boolean {
    return this.logs.has(owner);
  }
  /** The header of the newest state of `owner` we applied (its advertised load, as relayed). */
  header(owner: NodeId): SnapshotHeader | undefined {
    return this.logs.get(owner)?.header;
  }

  /** Our digest: ourselves first, then every owner held. */
  digest(self: OwnState): DigestEntry[] {
    const h = self.header();
    const out: DigestEntry[] = [{ owner: this.selfId, epoch: h.epoch, version: h.version }];
    for (const owner of this.logs.keys()) {
      const held = this.estimates.held(owner) as { epoch: number; version: number };
      out.push({ owner, epoch: held.epoch, version: held.version });
    }
    return out;
  }

  /** A round: our digest to `fanout` members picked at random from `members`. */
  round(members: readonly NodeId[], self: OwnState): { to: NodeId; msg: GossipMessage }[] {
    const n = members.length;
    const k = Math.min(this.config.fanout, n);
    const picked = new Set<NodeId>();
    while (picked.size < k) picked.add(members[Math.floor(this.deps.random() * n)] as NodeId);
    const msg: GossipMessage = { type: "digest", entries: this.digest(self), room: this.hasRoom() };
    this.counters.digestsSent += picked.size;
    return [...picked].map((to) => ({ to, msg }));
  }

  /**
   * A message from `from`; returns the answer to send back, if any (states for a digest; the wanted
   * states for a states message that carries wants).
   */
  onMessage(_from: NodeId, msg: GossipMessage, self: OwnState): GossipMessage | undefined {
    if (msg.type === "digest") {
      if (msg.entries.length > this.config.maxDigest) {
        this.counters.invalid++;
        return undefined;
      }
      const theirs = new Map<NodeId, DigestEntry>();
      for (const e of msg.entries) theirs.set(e.owner, e);
      const states = this.statesFor(theirs, msg.room, self);
      const wants: DigestEntry[] = [];
      for (const e of msg.entries) {
        if (e.owner === this.selfId) continue;
        const held = this.estimates.held(e.owner);
        const newer =
          held === undefined
            ? this.hasRoom()
            : e.epoch > held.epoch || (e.epoch === held.epoch && e.version > held.version);
        if (newer)
          wants.push(
            held === undefined ? { owner: e.owner, epoch: 0, version: 0 } : { owner: e.owner, ...held },
          );
      }
      // An owner we do not hold is wanted from version 0 of epoch 0: anything of it is newer.
      return { type: "states", states, wants: wants.slice(0, this.config.maxDigest) };
    }
    if (msg.states.length > this.config.maxStates || msg.wants.length > this.config.maxDigest) {
      this.counters.invalid++;
      return undefined;
    }
    for (const s of msg.states) this.apply(s);
    if (msg.wants.length === 0) return undefined;
    const theirs = new Map<NodeId, DigestEntry>();
    for (const w of msg.wants) theirs.set(w.owner, w);
    return { type: "states", states: this.statesFor(theirs, false, self, true), wants: [] };
  }

  /** Our estimate of `owner` now includes a guess (an optimistic insert): never relay it whole. */
  polluted(owner: NodeId): void {
    const log = this.logs.get(owner);
    if (log) log.clean = false;
  }

  remove(owner: NodeId): void {
    this.logs.delete(owner);
    this.estimates.remove(owner);
  }

  /** A state of some owner (relayed or its own): applied by the one-writer rule, logged for relaying. */
  apply(s: Snapshot): void {
    const rx = this.counters.statesReceived;
    const owner = s.header.sender;
    if (owner === this.selfId || !(this.deps.member?.(owner) ?? true)) {
      rx.dropped++;
      return;
    }
    if (!this.logs.has(owner) && !this.admit(owner)) {
      rx.dropped++;
      return;
    }
    const verdict = this.estimates.apply(s);
    const log = this.logs.get(owner) as OwnerLog;
    if (verdict === "applied") {
      rx.applied++;
      const held = this.estimates.held(owner) as { epoch: number; version: number };
      const sameEpoch = log.header.epoch === held.epoch;
      log.header = s.header;
      // A full state, or a new epoch built from its empty version 0, is exactly the owner's tree.
      if (s.kind === "full" || !sameEpoch) {
        log.deltas = [];
        log.clean = true;
      }
      if (s.kind === "delta") {
        log.deltas.push(s.delta);
        if (log.deltas.length > this.config.deltaLog) log.deltas.shift();
      }
    } else if (verdict === "duplicate") rx.duplicate++;
    else if (verdict === "need-full") rx.needFull++;
    else rx.stale++;
    // A first state that did not fit holds nothing usable yet: keep the slot (version 0 of its epoch).
  }

  private hasRoom(): boolean {
    return this.logs.size < this.config.maxEstimates;
  }

  /** Takes a new owner: while there is room, else (discovery) in place of the least useful. */
  private admit(owner: NodeId): boolean {
    if (!this.hasRoom()) {
      if (this.deps.random() * this.config.discoveryOdds >= 1) return false;
      let worst: NodeId | undefined;
      let worstScore = Number.POSITIVE_INFINITY;
      for (const o of this.logs.keys()) {
        const sc = this.deps.score?.(o) ?? 0;
        if (sc < worstScore) {
          worst = o;
          worstScore = sc;
        }
      }
      if (worst === undefined) return false;
      this.remove(worst);
    }
    const header: SnapshotHeader = {
      sender: owner,
      epoch: -1,
      version: 0,
      tokenCount: 0,
      capacity: 0,
      queueDepth: 0,
      pushBackMs: 0,
    };
    this.logs.set(owner, { header, deltas: [], clean: false });
    invariant(this.logs.size <= this.config.maxEstimates, "scuttlebutt holds more owners than maxEstimates");
    return true;
  }

  /**
   * What a peer that holds `theirs` lacks: for each owner we hold newer (ourselves included), the
   * delta chain from its version, else the whole key set. `room`: also owners it does not hold at
   * all (when it has no room, one random such owner: discovery). `onlyListed`: just those in `theirs`.
   */
  private statesFor(
    theirs: Map<NodeId, DigestEntry>,
    room: boolean,
    self: OwnState,
    onlyListed = false,
  ): Snapshot[] {
    const out: Snapshot[] = [];
    const max = this.config.maxStates;
    const own = this.ownStates(theirs.get(this.selfId), self, onlyListed);
    for (const s of own) out.push(s);
    const unheld: NodeId[] = [];
    for (const [owner, log] of this.logs) {
      if (out.length >= max) break;
      const e = theirs.get(owner);
      if (e === undefined) {
        if (!onlyListed) unheld.push(owner);
        continue;
      }
      this.relayStates(owner, log, e, out);
    }
    if (unheld.length > 0) {
      const take = room ? unheld : [unheld[Math.floor(this.deps.random() * unheld.length)] as NodeId];
      for (const owner of take) {
        if (out.length >= max) break;
        this.relayStates(owner, this.logs.get(owner) as OwnerLog, undefined, out);
      }
    }
    return out.slice(0, max);
  }

  private ownStates(e: DigestEntry | undefined, self: OwnState, onlyListed: boolean): Snapshot[] {
    if (e === undefined && onlyListed) return [];
    const h = self.header();
    if (e !== undefined && e.epoch === h.epoch && e.version >= h.version) return [];
    if (e !== undefined && e.epoch === h.epoch) {
      const delta = self.changesSince(e.version);
      if (delta !== undefined) {
        this.counters.statesSent.delta++;
        return [{ kind: "delta", header: h, delta }];
      }
    }
    this.counters.statesSent.full++;
    return [{ kind: "full", header: h, body: self.snapshotBody() }];
  }

  /** Owner's states from what the peer holds (`e`; undefined = nothing) to ours, into `out`. */
  private relayStates(owner: NodeId, log: OwnerLog, e: DigestEntry | undefined, out: Snapshot[]): void {
    const held = this.estimates.held(owner);
    if (held === undefined || held.epoch !== log.header.epoch) return;
    if (e !== undefined && (e.epoch > held.epoch || (e.epoch === held.epoch && e.version >= held.version)))
      return;
    if (e !== undefined && e.epoch === held.epoch) {
      const i = log.deltas.findIndex((d) => d.baseVersion === e.version);
      if (i >= 0) {
        for (let j = i; j < log.deltas.length; j++) {
          const d = log.deltas[j] as SnapshotDelta;
          out.push({ kind: "delta", header: { ...log.header, version: d.version }, delta: d });
          this.counters.statesSent.delta++;
        }
        return;
      }
    }
    if (!log.clean) return;
    const keys = this.index.estimateKeys(owner);
    out.push({ kind: "full", header: log.header, body: { blockSize: this.index.blockSize, keys } });
    this.counters.statesSent.full++;
  }
}
