/**
 * Scuttlebutt anti-entropy (van Renesse et al. 2008) for the peer estimates of §3.4: each round a node
 * sends a digest — (owner, epoch, version) of every owner it holds, itself included — to `fanout`
 * random members; the receiver answers with the states the initiator lacks and the owners it lacks
 * itself ("wants"), which the initiator then sends. Any node sends any owner's state (relay): safe
 * because each estimate has one writer and (epoch, version) only moves forward (Estimates), so a
 * relayed state older than what the receiver holds is ignored.
 *
 * A round's digests go to its partners one after another (`chain`): the second partner is sent a
 * digest that already holds what the first sent, so the same change is not pulled twice; an owner we
 * asked one peer for is not asked of another while the answer is on its way (`pendingMs`).
 *
 * How a relay carries another owner's change: it keeps the last `deltaLog` deltas it applied for that
 * owner, consecutive, and sends the chain from the receiver's version netted into one delta (a key
 * added then evicted costs nothing); a receiver further behind (or
 * of another epoch) gets the owner's whole key set — from our estimate, and only while that estimate
 * is exactly the owner's (no optimistic insert since: `clean`), else nothing (the owner or a cleaner
 * relay sends it). Cost: the log holds at most deltaLog × the keys of those deltas per owner; a chain
 * costs at most the sum of its deltas, a fallback 6 bytes per key of the owner's tree.
 *
 * `maxEstimates` bounds the owners held: a digest says how many new owners its sender would take, and
 * no more are sent to it or asked for, picked at random (so owners spread over holders, not the same
 * first few everywhere); when full, one owner we lack is asked for every `discoveryMs`, which replaces
 * the least useful held owner (the node scores usefulness: recent matches for its traffic), so new
 * specialists are still discovered without re-fetching whole key sets all the time.
 */
import { Estimates } from "../../estimates.js";
import { invariant } from "../../invariant.js";
import type { PeerIndex } from "../../peer-index.js";
import { isNewer, type Snapshot, type SnapshotHeader } from "../../snapshot.js";
import {
  DEFAULT_SCUTTLEBUTT,
  type DigestEntry,
  type GossipMessage,
  type ScuttlebuttConfig,
  type ScuttlebuttCounters,
  type ScuttlebuttDeps,
} from "./config.js";
import { Holders, Renewals } from "./holders.js";
import {
  netDeltas,
  type OwnerLog,
  type OwnerState,
  type OwnState,
  ownState,
  pickDistinct,
  pickRandom,
  relayState,
} from "./states.js";

// Still importable from here (the selection itself is states.ts's, the vocabulary config.ts's).
export type {
  DigestEntry,
  GossipMessage,
  OwnerState,
  OwnState,
  ScuttlebuttConfig,
  ScuttlebuttCounters,
  ScuttlebuttDeps,
};
export { DEFAULT_SCUTTLEBUTT, netDeltas };

/** A member's id (node/types.ts's NodeId). */
type NodeId = string;

/** Renewal digests to owners just taken (or whose push did not apply) per round, at most. */
const URGENT_RENEWALS = 8;
/** Held owners a round's digest lists with push to holders (besides ourselves), by default. */
const DIGEST_SAMPLE = 16;

export class Scuttlebutt {
  readonly estimates: Estimates;
  private readonly logs = new Map<NodeId, OwnerLog>();
  /** The one owner we asked for while full (discovery): admitted in place of the least useful. */
  private discovering: NodeId | undefined;
  private discoveredAt: number | undefined;
  /** This round's partners still to get our digest, and the one whose answer we wait for. */
  private chain: { awaiting: NodeId; rest: NodeId[] } | undefined;
  /** Owners we asked someone for (wants), and when: not asked again while the answer is on its way. */
  private readonly asked = new Map<NodeId, number>();
  /** With `pushToHolders`: the members holding us (pushed our change each round), and our renewals. */
  private holders: Holders | undefined;
  private readonly renewals = new Renewals();
  private rounds = 0;
  /** An owner's whole key set, from our estimate (for relayState; one function, not one per call). */
  private readonly bodyOf = (owner: NodeId) => ({
    blockSize: this.index.blockSize,
    keys: this.index.estimateKeys(owner),
  });
  /** Scratch for a round's sampled digest: the owners held (reused: one round at a time). */
  private readonly sampleFrom: NodeId[] = [];
  /** Whether the last round digest listed a sample of the owners held (roundDigest). */
  private sampled = false;
  readonly counters: ScuttlebuttCounters = {
    digestsSent: 0,
    statesSent: { full: 0, delta: 0 },
    statesReceived: { applied: 0, stale: 0, duplicate: 0, needFull: 0, dropped: 0, deferred: 0 },
    invalid: 0,
  };

  constructor(
    private readonly selfId: NodeId,
    readonly index: PeerIndex,
    private readonly deps: ScuttlebuttDeps,
    private readonly config: ScuttlebuttConfig = DEFAULT_SCUTTLEBUTT,
  ) {
    this.estimates = new Estimates(index, config.stepKeys ?? 0);
    if (config.pushToHolders) this.pushToHolders();
  }

  /** From now on, push our changes to the members holding us (config `pushToHolders`). */
  pushToHolders(): void {
    if (this.holders !== undefined) return;
    const { config } = this;
    const cap = Number.isFinite(config.maxEstimates) ? config.maxEstimates : config.maxStates;
    this.holders = new Holders(config.maxHolders ?? 4 * cap + 16, config.holderLeaseRounds ?? 4 * cap + 16);
  }

  /** Owners we hold an estimate of (not ourselves). */
  owners(): IterableIterator<NodeId> {
    return this.logs.keys();
  }
  /** How many owners we hold. */
  get held(): number {
    return this.logs.size;
  }
  holds(owner: NodeId): boolean {
    return this.logs.has(owner);
  }
  /** The header of the newest state of `owner` we applied (its advertised load, as relayed). */
  header(owner: NodeId): SnapshotHeader | undefined {
    return this.logs.get(owner)?.header;
  }

  /** Our digest: ourselves first, then every owner held (at the version a staged apply will hold). */
  digest(self: OwnState): DigestEntry[] {
    const out: DigestEntry[] = [this.selfEntry(self)];
    for (const [owner, log] of this.logs) {
      const e = this.entryOf(owner, log);
      if (e !== undefined) out.push(e);
    }
    return out;
  }

  /** Our own digest entry: our tree's (epoch, version). */
  private selfEntry(self: OwnState): DigestEntry {
    const h = self.header();
    return { owner: this.selfId, epoch: h.epoch, version: h.version };
  }

  /**
   * A held owner's digest entry, at what we hold or will once its staged apply is in; version 0 while
   * our estimate holds a wrong guess (asks for the whole set). Undefined: nothing of it held yet.
   */
  private entryOf(owner: NodeId, log: OwnerLog): DigestEntry | undefined {
    const held = this.holding(owner, log);
    if (held === undefined) return undefined;
    return { owner, epoch: held.epoch, version: log.wantFull ? 0 : held.version };
  }

  /**
   * The digest a round sends: the whole one, or with push to holders (where owners keep their holders
   * up to date themselves) ourselves and `digestSample` held owners at random — enough for partners to
   * find owners to take or discover, at a size that does not grow with the owners held.
   */
  private roundDigest(self: OwnState): DigestEntry[] {
    const k = this.config.digestSample ?? DIGEST_SAMPLE;
    this.sampled = false;
    if (this.holders === undefined) return this.digest(self);
    // The sample is drawn over the owners the whole digest would list, in its order, and only the
    // picked get an entry: the same draws and entries as sampling the whole digest, without it.
    const owners = this.sampleFrom;
    owners.length = 0;
    for (const [owner, log] of this.logs) if (this.holding(owner, log) !== undefined) owners.push(owner);
    if (owners.length <= k) return this.digest(self);
    this.sampled = true;
    const out: DigestEntry[] = [this.selfEntry(self)];
    for (const owner of pickRandom(owners, k, this.deps.random))
      out.push(this.entryOf(owner, this.logs.get(owner) as OwnerLog) as DigestEntry);
    return out;
  }

  /**
   * A round's digest message. A sampled digest (fewer entries than owners held) says room 0: its
   * receiver reads an owner missing from a digest as one its sender lacks and sends it whole (itself
   * too) to a sender with room, so with a sample it sent whole key sets to members that held them.
   * The sender still takes new owners: those listed in the digests it receives (wants, up to its room).
   */
  private roundMessage(self: OwnState): GossipMessage {
    const entries = this.roundDigest(self);
    return { type: "digest", entries, room: this.sampled ? 0 : this.room() };
  }

  /** True while a staged apply needs `step` calls (the node arms a timer). */
  get busy(): boolean {
    return this.estimates.busy;
  }

  /** One step of staged apply; states whose apply completed are logged (relayed from then on). */
  step(): void {
    this.estimates.step();
    const busy = this.estimates.busy;
    for (const [owner, log] of this.logs) {
      const d = log.deferred;
      if (d === undefined) continue;
      const held = this.estimates.held(owner);
      const h = d.snapshot.header;
      if (held !== undefined && held.epoch === h.epoch && held.version === h.version) {
        log.deferred = undefined;
        this.settle(owner, log, d.snapshot, d.blocks, "applied");
      } else if (!busy || (held !== undefined && isNewer(held, h))) log.deferred = undefined;
    }
  }

  /** What we hold of `owner`, or will once its staged apply is in. */
  private holding(owner: NodeId, log: OwnerLog): { epoch: number; version: number } | undefined {
    const held = this.estimates.heldNow(owner);
    const d = log.deferred?.snapshot.header;
    if (d === undefined || (held !== undefined && !isNewer(d, held))) return held;
    return { epoch: d.epoch, version: d.version };
  }

  /**
   * A round: our digest to `fanout` members picked at random from `members` — with `chain`, to the
   * first now and to each next one when the previous answered (`continueRound`); a lost answer ends
   * the round early (the next round starts afresh).
   */
  round(members: readonly NodeId[], self: OwnState): { to: NodeId; msg: GossipMessage }[] {
    const to = pickDistinct(members, this.config.fanout, this.deps.random);
    this.chain = undefined;
    if (this.config.chain && to.length > 1) {
      const [first, ...rest] = to as [NodeId, ...NodeId[]];
      this.chain = { awaiting: first, rest };
      to.length = 1;
    }
    const msg = this.roundMessage(self);
    this.counters.digestsSent += to.length;
    const out = to.map((t) => ({ to: t, msg }));
    if (this.holders !== undefined) this.pushRound(self, out);
    return out;
  }

  /**
   * Push to holders (holders.ts): our change to each member holding us, from its cursor; and a
   * one-entry digest to one owner we hold, which keeps us its holder (and corrects its cursor).
   */
  private pushRound(self: OwnState, out: { to: NodeId; msg: GossipMessage }[]): void {
    const holders = this.holders as Holders;
    const h = self.header();
    const member = (id: NodeId) => this.deps.member?.(id) ?? true;
    for (const { to, from } of holders.due(h, ++this.rounds, member)) {
      const s = ownState(from, self);
      if (s === undefined) continue;
      this.counters.statesSent[s.snapshot.kind === "full" ? "full" : "delta"]++;
      out.push({ to, msg: { type: "states", states: [s], wants: [] } });
    }
    for (const owner of this.renewals.next(this.logs, this.rounds, URGENT_RENEWALS)) {
      const entry = this.entryOf(owner, this.logs.get(owner) as OwnerLog);
      if (entry === undefined || !member(owner)) continue;
      this.counters.digestsSent++;
      out.push({ to: owner, msg: { type: "digest", entries: [entry], room: 0 } });
    }
  }

  /**
   * A member just admitted that we hold no estimate of (`unheld`: how many live members we lack): a
   * digest of ourselves alone, with room for one owner, so it answers with its own state and asks for
   * ours — the pair hold each other within a round trip instead of after the rounds relays take to
   * reach everyone (a cluster forming, a node joining). Bounded by what we would take: below
   * `maxEstimates`, a random share (room / unheld) of the members admitted is greeted.
   */
  greet(to: NodeId, self: OwnState, unheld: number): GossipMessage | undefined {
    if (to === this.selfId || this.logs.has(to)) return undefined;
    const room = this.config.maxEstimates - this.logs.size;
    if (room <= 0 || (room < unheld && this.deps.random() * unheld >= room)) return undefined;
    this.counters.digestsSent++;
    return { type: "digest", entries: [this.selfEntry(self)], room: 1 };
  }

  /**
   * Content discovery (summary.ts): `owner`'s cache summary lists a prefix our traffic asks for and
   * no owner held has. It is admitted now (in place of the least useful owner when full), holding
   * nothing until its state comes, and asked for that state. undefined: held already, or not a member.
   */
  seek(owner: NodeId): GossipMessage | undefined {
    if (owner === this.selfId || this.logs.has(owner) || !(this.deps.member?.(owner) ?? true))
      return undefined;
    this.discovering = owner;
    if (!this.admit(owner)) return undefined;
    const now = this.deps.now?.();
    if (now !== undefined) this.asked.set(owner, now);
    return { type: "states", states: [], wants: [{ owner, epoch: 0, version: 0 }] };
  }

  /**
   * After a message from `from`: if it answered our round's digest, that digest (now up to date with
   * what `from` sent) to the round's next partner.
   */
  continueRound(from: NodeId, self: OwnState): { to: NodeId; msg: GossipMessage } | undefined {
    const c = this.chain;
    if (c === undefined || c.awaiting !== from) return undefined;
    const to = c.rest.shift();
    if (to === undefined) {
      this.chain = undefined;
      return undefined;
    }
    c.awaiting = to;
    this.counters.digestsSent++;
    return { to, msg: this.roundMessage(self) };
  }

  /**
   * A message from `from`; returns the answer to send back, if any (states for a digest; the wanted
   * states for a states message that carries wants).
   */
  onMessage(from: NodeId, msg: GossipMessage, self: OwnState): GossipMessage | undefined {
    if (msg.type === "digest") {
      if (msg.entries.length > this.config.maxDigest) {
        this.counters.invalid++;
        return undefined;
      }
      const theirs = new Map<NodeId, DigestEntry>();
      for (const e of msg.entries) theirs.set(e.owner, e);
      const states = this.statesFor(theirs, Math.max(0, Math.floor(msg.room)), self);
      this.noteHolder(from, theirs, states, self);
      const wants: DigestEntry[] = [];
      const room = this.room();
      const unheld: NodeId[] = [];
      const now = this.deps.now?.();
      for (const e of msg.entries) {
        if (e.owner === this.selfId || this.isPending(e.owner, now)) continue;
        const log = this.logs.get(e.owner);
        const held = log === undefined ? undefined : this.holding(e.owner, log);
        if (held === undefined) unheld.push(e.owner);
        else if (e.epoch > held.epoch || (e.epoch === held.epoch && e.version > held.version))
          wants.push({ owner: e.owner, ...held });
      }
      // New owners, as many as we have room for, at random (an owner is held by some, not by all).
      for (const owner of pickRandom(unheld, room, this.deps.random))
        wants.push({ owner, epoch: 0, version: 0 });
      // Full: one owner we do not hold is asked for now and then (it then replaces our least useful
      // estimate), so new specialists are still found: once per discoveryMs, or (no clock) one in
      // discoveryOdds exchanges.
      if (room === 0 && unheld.length > 0 && this.mayDiscover(now)) {
        const owner = unheld[Math.floor(this.deps.random() * unheld.length)] as NodeId;
        wants.push({ owner, epoch: 0, version: 0 });
        this.discovering = owner;
        this.discoveredAt = now;
      }
      if (now !== undefined) for (const w of wants) this.asked.set(w.owner, now);
      this.prunePending(now);
      // An owner we do not hold is wanted from version 0 of epoch 0: anything of it is newer.
      return { type: "states", states, wants: wants.slice(0, this.config.maxDigest) };
    }
    if (msg.states.length > this.config.maxStates || msg.wants.length > this.config.maxDigest) {
      this.counters.invalid++;
      return undefined;
    }
    for (const s of msg.states) {
      const verdict = this.apply(s.snapshot, s.blocks);
      // The owner's own push did not fit our estimate: our cursor at it is off; renew with it now.
      if (this.holders !== undefined && verdict === "need-full" && s.snapshot.header.sender === from)
        this.renewals.mismatch(from);
    }
    if (msg.wants.length === 0) return undefined;
    const theirs = new Map<NodeId, DigestEntry | undefined>();
    // A want at version 0 is of an owner the peer does not hold (or whose whole set it needs): sent
    // whole even when that owner is itself still at version 0 (an empty cache, a cluster forming).
    for (const w of msg.wants) theirs.set(w.owner, w.version === 0 ? undefined : w);
    const states = this.statesFor(theirs, 0, self, true);
    this.noteHolder(from, theirs, states, self);
    return { type: "states", states, wants: [] };
  }

  /** `from` listed us (it holds us or asks for us) or is sent our state: it holds our version now. */
  private noteHolder(
    from: NodeId,
    theirs: Map<NodeId, DigestEntry | undefined>,
    states: OwnerState[],
    self: OwnState,
  ): void {
    if (this.holders === undefined) return;
    if (!theirs.has(this.selfId) && states[0]?.snapshot.header.sender !== this.selfId) return;
    this.holders.note(from, self.header(), this.rounds);
  }

  /** Our estimate of `owner` now includes a guess (an optimistic insert): never relay it whole. */
  polluted(owner: NodeId): void {
    const log = this.logs.get(owner);
    if (log) log.clean = false;
  }

  remove(owner: NodeId): void {
    this.holders?.drop(owner);
    this.renewals.forget(owner);
    this.logs.delete(owner);
    this.asked.delete(owner);
    this.estimates.remove(owner);
  }

  /** A state of some owner (relayed or its own): applied by the one-writer rule, logged for relaying. */
  apply(s: Snapshot, blocks: number): string {
    const rx = this.counters.statesReceived;
    const owner = s.header.sender;
    if (owner === this.selfId || !(this.deps.member?.(owner) ?? true)) {
      rx.dropped++;
      return "dropped";
    }
    if (!this.logs.has(owner) && !this.admit(owner)) {
      rx.dropped++;
      return "dropped";
    }
    const verdict = this.estimates.apply(s);
    const log = this.logs.get(owner) as OwnerLog;
    this.asked.delete(owner);
    if (verdict === "deferred") {
      rx.deferred++;
      log.deferred = { snapshot: s, blocks };
      return verdict;
    }
    this.settle(owner, log, s, blocks, verdict);
    return verdict;
  }

  /** The log after `s` was applied (or refused): header, delta chain, whether our estimate is exact. */
  private settle(owner: NodeId, log: OwnerLog, s: Snapshot, blocks: number, verdict: string): void {
    const rx = this.counters.statesReceived;
    if (verdict === "applied") {
      rx.applied++;
      this.deps.onApplied?.(s.header);
      const held = this.estimates.held(owner) as { epoch: number; version: number };
      const sameEpoch = log.header.epoch === held.epoch;
      log.header = s.header;
      log.round = this.rounds;
      if (blocks >= 0) log.blocks = blocks;
      // A full state, or a new epoch built from its empty version 0, is exactly the owner's tree.
      if (s.kind === "full" || !sameEpoch) {
        log.deltas = [];
        log.clean = true;
      }
      if (s.kind === "delta") {
        log.deltas.push(s.delta);
        if (log.deltas.length > this.config.deltaLog) log.deltas.shift();
      }
    } else if (verdict === "duplicate") {
      rx.duplicate++;
      // The whole set at a version we hold: the truth, which also clears a wrong guess (in steps if
      // large; our count check below then waits for the next state).
      if (s.kind === "full") this.estimates.repair(s);
    } else if (verdict === "need-full") rx.needFull++;
    else rx.stale++;
    const held = this.estimates.held(owner);
    const confirms = verdict === "applied" || verdict === "duplicate";
    if (blocks >= 0 && confirms && held?.version === s.header.version) {
      // Optimistic inserts only add keys: the owner's count tells whether ours is exact.
      const exact = this.index.estimateSize(owner) === blocks * this.index.blockSize;
      log.clean = exact;
      log.wantFull = !exact && (this.deps.settled?.(owner) ?? true);
      if (log.wantFull && this.holders !== undefined) this.renewals.mismatch(owner);
    }
    // A first state that did not fit holds nothing usable yet: keep the slot (version 0 of its epoch).
  }

  /** We asked someone for `owner` less than `pendingMs` ago. */
  private isPending(owner: NodeId, now: number | undefined): boolean {
    const at = now === undefined ? undefined : this.asked.get(owner);
    return at !== undefined && now !== undefined && now - at < this.config.pendingMs;
  }

  /** Forgets answers that never came (lost): `asked` stays within the owners held and a few more. */
  private prunePending(now: number | undefined): void {
    if (now === undefined || this.asked.size <= 2 * this.logs.size + 16) return;
    for (const [owner, at] of this.asked) if (now - at >= this.config.pendingMs) this.asked.delete(owner);
  }

  private hasRoom(): boolean {
    return this.logs.size < this.config.maxEstimates;
  }

  /** Owners we would still take (at most maxStates: one message's worth). */
  private room(): number {
    return Math.max(0, Math.min(this.config.maxEstimates - this.logs.size, this.config.maxStates));
  }

  private mayDiscover(now: number | undefined): boolean {
    if (now === undefined) return this.deps.random() * this.config.discoveryOdds < 1;
    return this.discoveredAt === undefined || now - this.discoveredAt >= this.config.discoveryMs;
  }

  /** Takes a new owner: while there is room, else (discovery) in place of the least useful. */
  private admit(owner: NodeId): boolean {
    if (!this.hasRoom()) {
      if (owner !== this.discovering) return false;
      this.discovering = undefined;
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
    this.logs.set(owner, { header, blocks: 0, deltas: [], clean: false, wantFull: false });
    // Tell the owner we hold it (a renewal digest), so it pushes its changes to us.
    if (this.holders !== undefined) this.renewals.mismatch(owner);
    invariant(this.logs.size <= this.config.maxEstimates, "scuttlebutt holds more owners than maxEstimates");
    return true;
  }

  /**
   * What a peer that holds `theirs` lacks: for each owner we hold newer (ourselves included), the
   * delta chain from its version, else the whole key set. `room`: also owners it does not hold at
   * all (only when it has room: a full receiver asks for its discoveries itself). `onlyListed`: just those in `theirs`.
   */
  private statesFor(
    theirs: Map<NodeId, DigestEntry | undefined>,
    room: number,
    self: OwnState,
    onlyListed = false,
  ): OwnerState[] {
    const out: OwnerState[] = [];
    const max = this.config.maxStates;
    const mine = theirs.get(this.selfId);
    const listed = theirs.has(this.selfId);
    // Ourselves, to a peer that does not hold us, only if it has room (else it would drop it).
    if (listed || room > 0) {
      const own = !listed && onlyListed ? undefined : ownState(mine, self);
      if (own !== undefined) this.send(own, out);
      if (!listed && own !== undefined) room -= 1;
    }
    const unheld: NodeId[] = [];
    for (const [owner, log] of this.logs) {
      if (out.length >= max) break;
      if (!theirs.has(owner)) {
        // Only drawn from when the peer has room (a draw of none takes nothing and draws nothing).
        if (!onlyListed && room > 0) unheld.push(owner);
        continue;
      }
      this.relayStates(owner, log, theirs.get(owner), out);
    }
    // Owners it lacks, as many as it has room for, at random (not the same first few to everyone).
    for (const owner of pickRandom(unheld, Math.min(room, max - out.length), this.deps.random))
      this.relayStates(owner, this.logs.get(owner) as OwnerLog, undefined, out);
    return out.slice(0, max);
  }

  /**
   * Owner's states from what the peer holds (`e`; undefined = nothing) to ours, into `out`. With push
   * to holders, a change we took this round is not relayed to a peer that holds the owner: the owner
   * pushes it to its holders this round too, so relaying it made the same delta arrive twice. A
   * holder still behind a round later (a lost push, a holder the owner does not know yet) gets it.
   */
  private relayStates(owner: NodeId, log: OwnerLog, e: DigestEntry | undefined, out: OwnerState[]): void {
    if (this.holders !== undefined && e !== undefined && e.version > 0 && log.round === this.rounds) return;
    const s = relayState(log, this.estimates.heldNow(owner), e, this.bodyOf, owner);
    if (s !== undefined) this.send(s, out);
  }

  private send(s: OwnerState, out: OwnerState[]): void {
    out.push(s);
    this.counters.statesSent[s.snapshot.kind === "full" ? "full" : "delta"]++;
  }
}
