/**
 * SWIM membership (Das, Gupta, Motivala 2002) with Lifeguard (Dadgar et al. 2018), as a pure state
 * machine: `handle(input)` → effects (types.ts). Written here rather than taken from npm: no maintained
 * Node library fits a pure core (swim-js owns its UDP socket and clock, ringpop-node is archived),
 * and here the simulator runs exactly the code a daemon would.
 *
 *  - Each probe period (1 s × (1 + local health)) one member, round-robin over a shuffled list, gets a
 *    `ping`; no `ack` within the probe timeout → `ping-req` through k members, who answer `ack` or
 *    (Lifeguard) `nack`; no ack by the period's end → it is probed again at once, and suspected
 *    after `probeAttempts` (2) failed periods in a row (so message loss alone does not suspect it).
 *    The probe cycle and the ping-reqs we relay live in probe-cycle.ts; this file applies updates.
 *  - A suspicion times out into `dead` after 4 × max(1, log10 N) probe periods; Lifeguard starts it
 *    6× longer and shortens it with each independent suspicion of the same member. The suspect refutes
 *    by raising its incarnation; beliefs order by (incarnation, alive < suspect < dead).
 *  - Lifeguard's local health: failed probes, missed nacks and refutations of ourselves raise it, a
 *    successful probe lowers it; probe interval and timeout stretch by (1 + it), so a slow node
 *    suspects less.
 *  - Updates ride on every message (Broadcasts) and on a gossip tick (200 ms, 3 members, only when
 *    there is news); a push-pull of the whole list (`sync`) joins through seeds and repairs what
 *    gossip missed. Joining and push-pull live in push-pull.ts.
 *  - A member we hold suspect or dead that pings us hears so in our ack, and a probe of a suspect
 *    states its suspicion afresh: it refutes on first contact, not when the news happens to reach it.
 *  - Only verified members join: an id heard of from anyone becomes a bounded candidate, and joins
 *    once our own `verify-member` says yes, as does a dead or left member heard alive again (a restart
 *    may serve another model; its tombstone kept till then). A live member's new life (a restart within
 *    its suspicion time) is checked too (refused: dead to us alone; a refutation, one more, is not:
 *    self-news.ts). Unverified senders never suspect or kill. Answers and re-checks: admissions.ts.
 */

import type { RefusedView } from "../../refusals.js";
import { Admissions } from "./admissions.js";
import { Broadcasts } from "./broadcasts.js";
import { Candidates } from "./candidates.js";
import { resolveSwimConfig, retransmitLimit, type SwimConfig, type SwimConfigInput } from "./config.js";
import { bootIncarnation, plausibleMax } from "./incarnation.js";
import { type FormerMember, MemberTable } from "./members.js";
import { ProbeCycle } from "./probe-cycle.js";
import { PushPull } from "./push-pull.js";
import { SelfLives } from "./self-news.js";
import {
  type MemberStatus,
  type MemberUpdate,
  type NodeId,
  type SwimEffect,
  type SwimInput,
  type SwimMemberView,
  type SwimMessage,
  type SwimStats,
  type SwimTimer,
  zeroSwimStats,
} from "./types.js";

export interface SwimDeps {
  now(): number;
  random(): number;
  /** Told of every status change this node makes (the simulator's trace; optional). */
  observe?(id: NodeId, from: MemberStatus | undefined, to: MemberStatus): void;
}

export class Swim {
  readonly config: SwimConfig;
  /** Starts at the boot time (`bootIncarnation`): a restart outranks all said of the previous life. */
  private incarnation: number;
  private readonly lives: SelfLives;
  private leaving = false;
  private readonly members: MemberTable;
  private readonly candidates: Candidates;
  private readonly broadcasts = new Broadcasts();
  private readonly probes: ProbeCycle;
  private readonly pushPull: PushPull;
  private readonly admissions: Admissions;
  private probesDone = 0;
  readonly stats: SwimStats = zeroSwimStats();

  constructor(
    readonly selfId: NodeId,
    seeds: readonly NodeId[],
    private readonly deps: SwimDeps,
    config: SwimConfigInput = {},
  ) {
    this.config = resolveSwimConfig(config);
    this.incarnation = bootIncarnation(deps.now());
    this.lives = new SelfLives(this.incarnation, this.stats);
    this.members = new MemberTable(selfId, this.config, deps.random, deps.observe);
    this.candidates = new Candidates(selfId, this.config, (id) => this.members.isLive(id), this.stats);
    this.pushPull = new PushPull(
      selfId,
      seeds,
      this.config,
      this.members,
      this.candidates,
      () => deps.random(),
      () => this.selfUpdate(),
      deps.now(),
    );
    this.probes = new ProbeCycle(
      selfId,
      this.config,
      this.members,
      this.broadcasts,
      this.stats,
      () => deps.random(),
      {
        piggyback: (first) => this.piggyback(first),
        suspect: (u, now, out) => this.apply(u, true, now, out),
      },
    );
    this.admissions = new Admissions({
      config: this.config,
      members: this.members,
      candidates: this.candidates,
      broadcasts: this.broadcasts,
      probes: this.probes,
      pushPull: this.pushPull,
      stats: this.stats,
    });
  }

  /** Arms the timers and asks the seeds for their member lists (the join). */
  start(): SwimEffect[] {
    const out: SwimEffect[] = [];
    // A random first offset, so members started together do not probe in lockstep.
    const first = this.deps.random() * this.config.probeIntervalMs;
    out.push({ type: "set-timer", timer: { kind: "swim-probe" }, delayMs: first });
    out.push({ type: "set-timer", timer: { kind: "swim-gossip" }, delayMs: this.config.gossipIntervalMs });
    this.pushPull.join(out);
    return out;
  }

  /** Leave: our `left` update goes to every member now (and rides on anything we still send). */
  leave(): SwimEffect[] {
    this.leaving = true;
    this.broadcasts.push(this.selfUpdate());
    return this.members.live.map((to) => ({
      type: "send",
      to,
      msg: { type: "goodbye", incarnation: this.incarnation },
    }));
  }

  handle(input: SwimInput): SwimEffect[] {
    const out: SwimEffect[] = [];
    const now = this.deps.now();
    switch (input.type) {
      case "message":
        this.onMessage(input.from, input.msg, now, out);
        break;
      case "timer":
        this.onTimer(input.timer, now, out);
        break;
      case "verified":
        this.admissions.verified(input.id, input.ok, now, out, input.reason, input.incarnation);
        break;
      case "seed":
        this.pushPull.addSeed(input.id, out);
        break;
    }
    return out;
  }

  // ---------------------------------------------------------------- views

  /** Alive and suspect members (the membership a node routes over), excluding ourselves. */
  liveMembers(): readonly NodeId[] {
    return this.members.live;
  }
  /** Moves whenever a member's status changes (views of the members are rebuilt only then). */
  get membersVersion(): number {
    return this.members.version;
  }
  status(id: NodeId): MemberStatus | undefined {
    if (id === this.selfId) return this.leaving ? "left" : "alive";
    return this.members.get(id)?.status;
  }
  memberViews(): SwimMemberView[] {
    return [...this.members.values()].map(({ id, status, incarnation }) => ({ id, status, incarnation }));
  }
  /** Dead and departed members still remembered (`deadRetainMs`), and how long ago each went. */
  formerMembers(now: number): FormerMember[] {
    return this.members.former(now);
  }
  get localHealth(): number {
    return this.probes.localHealth;
  }
  get currentIncarnation(): number {
    return this.incarnation;
  }
  /** Our hello's: none till a member's list answered ours (a restart's boot value may be below its past). */
  get saidIncarnation(): number | undefined {
    return this.pushPull.synced ? this.incarnation : undefined;
  }
  /** Ids refused by verification and remembered: why, and when each may be asked again. */
  refusedMembers(now: number): RefusedView[] {
    return this.candidates.refusals(now);
  }
  /** Ids heard of and being verified (or waiting to be): the members about to join, as far as we know. */
  pendingMembers(): number {
    return this.candidates.size;
  }
  /** Members counted for the log N factors: the live ones and ourselves. */
  clusterSize(): number {
    return this.members.live.length + 1;
  }

  // ---------------------------------------------------------------- messages

  private onMessage(from: NodeId, msg: SwimMessage, now: number, out: SwimEffect[]): void {
    if (from === this.selfId) return;
    const m = this.members.get(from);
    const held: MemberUpdate | undefined = m && { id: from, status: m.status, incarnation: m.incarnation };
    // A member refused since (its new life failed our check) speaks for no verified process; one put
    // out stays so when its refusal is forgotten (bounded): that loses its backoff, never our trust.
    const trusted = m !== undefined && !this.candidates.isRefused(from) && m.putOut !== true;
    if (!trusted) this.stats.unknownSender++;
    const entries = msg.type === "sync" ? msg.members : "updates" in msg ? msg.updates : [];
    if (entries.length > this.config.maxEntriesPerMessage) {
      this.stats.invalid++;
      return;
    }
    const named = this.candidates.named;
    for (const u of entries) this.apply(u, trusted, now, out);
    switch (msg.type) {
      case "ping": {
        // Unverified senders get an ack (they may be a joiner not yet verified) but no news. A
        // member we hold suspect, dead or left hears that first (the buddy system from the other
        // side): it refutes at once instead of waiting for the news to reach it by chance (a leave
        // too: one that pings us has not left, and a forged one it could not refute yet is otherwise
        // said again only by a push-pull).
        const own =
          m !== undefined && m.status !== "alive"
            ? (this.broadcasts.about(from) ?? { id: from, status: m.status, incarnation: m.incarnation })
            : undefined;
        out.push({
          type: "send",
          to: from,
          msg: { type: "ack", seq: msg.seq, updates: trusted ? this.piggyback(own) : [] },
        });
        if (!trusted) this.candidates.name(from, 0, now, out);
        break;
      }
      case "ping-req":
        // Relayed for anyone (one ping out per ping-req in, bounded): a member that has not verified
        // a new prober yet must not make it suspect its targets.
        this.probes.relay(from, msg.seq, msg.target, out);
        if (!trusted) this.candidates.name(from, 0, now, out);
        break;
      case "ack":
        this.probes.onAck(from, msg.seq, now, out);
        break;
      case "nack":
        this.probes.onNack(msg.seq);
        break;
      case "gossip":
        break;
      case "sync":
        if (!msg.reply) {
          this.pushPull.onList(msg.members, named, now, trusted);
          break;
        }
        this.pushPull.answer(from, msg.members, out, trusted ? held : undefined);
        if (!trusted) this.candidates.name(from, 0, now, out);
        break;
      case "goodbye":
        if (trusted) this.apply({ id: from, status: "left", incarnation: msg.incarnation }, true, now, out);
        break;
    }
  }

  /**
   * One update, by the ordering (incarnation, then alive < suspect < dead/left). Unverified senders
   * (and anyone, for an id we do not know) can only name candidates.
   */
  private apply(u: MemberUpdate, trusted: boolean, now: number, out: SwimEffect[]): void {
    if (u.incarnation > plausibleMax(this.config, u.id === this.selfId, now)) {
      this.stats.implausibleIncarnations++;
      return;
    }
    if (u.id === this.selfId) {
      if (this.leaving) return;
      const news = trusted ? this.lives.news(u, this.incarnation) : this.lives.stranger(u, this.incarnation);
      if (news.kind === "raise") this.raise(news.to, trusted && u.status !== "alive");
      // Said again, riding on our answer to this very message (self-news.ts).
      else if (news.kind === "resay" && this.broadcasts.about(this.selfId) === undefined)
        this.broadcasts.push(this.selfUpdate());
      return;
    }
    const m = this.members.get(u.id);
    if (m === undefined) {
      if (u.status === "alive") this.candidates.name(u.id, u.incarnation, now, out);
      return;
    }
    // Refused: nothing of it taken from anyone until a check passes; a newer life is only named.
    if (this.candidates.isRefused(u.id) || m.putOut === true) {
      if (u.status === "alive" && u.incarnation > m.incarnation)
        this.candidates.name(u.id, u.incarnation, now, out);
      return;
    }
    if (!trusted) return;
    if (u.incarnation < m.incarnation) return;
    const newer = u.incarnation > m.incarnation;
    if (u.status === "alive") {
      if (!newer) return;
      // Back from dead or left (a refuted death, a restart): another process may answer there now,
      // so it is a candidate again, checked as a first admission is (its tombstone stays till then).
      if (!this.members.isLive(u.id)) {
        this.candidates.name(u.id, u.incarnation, now, out);
        return;
      }
      if (!this.admissions.newLife(m, u.incarnation, now, out)) return;
      m.incarnation = u.incarnation;
      this.members.setStatus(m, "alive", now, out);
      this.broadcasts.push(u);
      return;
    }
    if (u.status === "suspect") {
      if (m.status === "dead" || m.status === "left") return;
      if (m.status === "suspect" && !newer) {
        if (u.from !== undefined && this.members.confirm(m, u.from)) this.broadcasts.push(u);
        return;
      }
      if (!this.admissions.newLife(m, u.incarnation, now, out)) return;
      m.incarnation = u.incarnation;
      this.members.suspect(m, u.from, now, out);
      this.stats.suspected++;
      this.broadcasts.push(u);
      return;
    }
    // dead or left
    if ((m.status === "dead" || m.status === "left") && !newer) return;
    m.incarnation = u.incarnation;
    this.members.setStatus(m, u.status, now, out);
    this.broadcasts.push(u);
  }

  /** News of us outbid: a suspicion (Lifeguard: a sign our own health is poor), or another life's alive. */
  private raise(to: number, suspicion: boolean): void {
    this.incarnation = to;
    this.broadcasts.push(this.selfUpdate());
    if (!suspicion) return;
    this.stats.refuted++;
    this.probes.health(1);
  }

  private selfUpdate(): MemberUpdate {
    return { id: this.selfId, status: this.leaving ? "left" : "alive", incarnation: this.incarnation };
  }

  // ---------------------------------------------------------------- timers

  private onTimer(t: SwimTimer, now: number, out: SwimEffect[]): void {
    switch (t.kind) {
      case "swim-probe":
        this.probes.finish(now, out);
        this.probePeriod(now, out);
        break;
      case "swim-probe-timeout":
        this.probes.goIndirect(t.seq, out);
        break;
      case "swim-relay-timeout":
        this.probes.relayTimeout(t.seq, out);
        break;
      case "swim-gossip":
        this.gossipTick(now, out);
        break;
    }
  }

  /** A new probe period: re-armed, rejoined if alone, now and then a reconnect, then the probe. */
  private probePeriod(now: number, out: SwimEffect[]): void {
    out.push({ type: "set-timer", timer: { kind: "swim-probe" }, delayMs: this.probes.periodMs() });
    this.pushPull.probePeriod(++this.probesDone, out);
    this.probes.start(now, out);
  }

  private gossipTick(now: number, out: SwimEffect[]): void {
    out.push({ type: "set-timer", timer: { kind: "swim-gossip" }, delayMs: this.config.gossipIntervalMs });
    for (const m of this.members.expiredSuspects(now)) {
      this.stats.declaredDead++;
      this.apply({ id: m.id, status: "dead", incarnation: m.incarnation, from: this.selfId }, true, now, out);
    }
    this.members.dropTombstones(now, this.config.deadRetainMs);
    this.admissions.recheckDue(now, out);
    if (this.broadcasts.size > 0) {
      for (const to of this.members.pick(this.config.gossipFanout, () => true)) {
        const updates = this.piggyback();
        if (updates.length === 0) break;
        out.push({ type: "send", to, msg: { type: "gossip", updates } });
      }
    }
    this.pushPull.gossipTick(now, out);
  }

  private piggyback(first?: MemberUpdate): MemberUpdate[] {
    return this.broadcasts.take(
      this.config.maxPiggyback,
      retransmitLimit(this.config, this.clusterSize()),
      first,
    );
  }
}
