/**
 * SWIM's joining and push-pull (owned by one Swim, swim.ts): who this node asks for whole member
 * lists (`sync`), when, and what it answers. Apart from the probe cycle and the updates it applies,
 * since all of it is about reaching and repairing the cluster, not about any one member's state.
 *
 *  - A push-pull of the whole list joins through seeds, repairs what gossip missed (every
 *    `pushPullIntervalMs`, scaled with N), and now and then goes to a remembered dead member so a
 *    healed partition rejoins. Until some list has reached it, a node also asks the first member it
 *    admits (a node restarted where its seeds are out of reach joins through whoever contacts it).
 *  - Joining is one push-pull: a seed answers a list request at once, and the joiner, as it verifies
 *    each member the list names, tells it that it is alive, so every member verifies the joiner in
 *    one round trip instead of waiting for gossip relayed hop by hop. A list that named members new
 *    to us is followed by a push-pull with a random member at the next gossip tick, until one names
 *    none: lists answered while a cluster forms (everyone joining at once) are partial.
 */

import type { Candidates } from "./candidates.js";
import { pushPullScale, type SwimConfig } from "./config.js";
import type { MemberTable } from "./members.js";
import type { MemberStatus, MemberUpdate, NodeId, SwimEffect } from "./types.js";

/** Lists in a row naming no one new that end a resync (see `quietLists`). */
const RESYNC_QUIET_LISTS = 2;

export class PushPull {
  private lastPushPull: number;
  /**
   * Whether some member's whole list has reached us since we were last alone. Until then the first
   * member we admit is asked for its list: a node whose seeds are out of reach (restarted inside a
   * partition) joins through whichever member contacts it, not only through a seed.
   */
  private listed = false;
  /**
   * Whether a member's list has answered ours since boot: it held its record of us (sent if newer
   * than ours) and we outbid it, so our incarnation is settled and our hello says it (swim.ts).
   */
  private everSynced = false;
  /**
   * When to push-pull again because the last list we asked for named members we did not know: lists
   * answered while the cluster is still forming (everyone joining at once) are partial, so a node
   * asks another member until a list teaches it nothing, instead of waiting for piggybacked news.
   */
  private resyncAt: number | undefined;
  /**
   * Lists in a row that named no one new since a list last did (undefined: no resync under way). One
   * such list ends the asking only after RESYNC_QUIET_LISTS: a partner asked early in a cluster's
   * formation can lack the same few members we do, and those then came only by gossip, seconds later.
   */
  private quietLists: number | undefined;
  /** Who a lone node asks for the member list: the configured seeds, then those added at run time. */
  private readonly seeds: NodeId[];

  constructor(
    private readonly selfId: NodeId,
    seeds: readonly NodeId[],
    private readonly config: SwimConfig,
    private readonly members: MemberTable,
    private readonly candidates: Candidates,
    private readonly random: () => number,
    /** Our own belief as we state it (alive, or left once leaving). */
    private readonly selfUpdate: () => MemberUpdate,
    now: number,
  ) {
    this.seeds = [...seeds];
    this.lastPushPull = now;
  }

  /**
   * A list we asked for (a seed's answer, verified or not yet), its entries already applied; `named`:
   * the candidates ever named before they were. Its entries named candidates, and each hears from us
   * once verified, so the members learn a joiner in one round trip instead of by gossip relayed hop
   * by hop (each hop waiting for its own verification). `trusted`: from a member (its news of us applied).
   */
  onList(list: readonly MemberUpdate[], named: number, now: number, trusted: boolean): void {
    if (trusted) this.everSynced = true;
    // An answer is what our list lacked (sendSync): only ourselves named in it still means a whole
    // list reached us when we hold other members already.
    const others = list.filter((u) => u.id !== this.selfId); // not our own old record (sendSync)
    if (others.length > 1 || this.members.live.length > 1) this.listed = true;
    for (const u of others) if (u.status === "alive") this.candidates.announceTo(u.id);
    // It named members new to us: another list (next gossip tick, another member) may too.
    if (this.candidates.named > named) {
      this.resyncAt ??= now;
      this.quietLists = 0;
    } else if (this.quietLists !== undefined && ++this.quietLists < RESYNC_QUIET_LISTS) this.resyncAt ??= now;
    else this.quietLists = undefined;
  }

  get synced(): boolean {
    return this.everSynced;
  }

  /**
   * Answered at once, verified or not: a list names candidates, never members, and the runtime only
   * lets senders holding the cluster's credential reach us. A joiner's sender joins (or not) by our
   * own verification, as anyone does. `held`: what we held of the asker before its list was applied.
   */
  answer(from: NodeId, theirs: readonly MemberUpdate[], out: SwimEffect[], held?: MemberUpdate): void {
    this.sendSync(from, false, out, theirs, held);
  }

  /**
   * A member just admitted: asked for its list while none has reached us, else (one a list we asked
   * for named) told we are alive, so it verifies us now rather than when gossip reaches it.
   */
  admitted(id: NodeId, announce: boolean, out: SwimEffect[]): void {
    if (!this.listed) this.sendSync(id, true, out);
    else if (announce)
      out.push({ type: "send", to: id, msg: { type: "gossip", updates: [this.selfUpdate()] } });
  }

  /** A probe period: rejoined if alone, and every `reconnectEveryProbes` periods a reconnect. */
  probePeriod(probesDone: number, out: SwimEffect[]): void {
    if (this.members.live.length === 0) {
      this.listed = false;
      this.join(out);
    }
    if (probesDone % this.config.reconnectEveryProbes === 0) this.reconnect(out);
  }

  /** The gossip tick's push-pull with a random live member: when due, or while a resync is under way. */
  gossipTick(now: number, out: SwimEffect[]): void {
    const live = this.members.live;
    const every = this.config.pushPullIntervalMs * pushPullScale(live.length + 1);
    const resync = this.resyncAt !== undefined && now >= this.resyncAt;
    if (((every > 0 && now - this.lastPushPull >= every) || resync) && live.length > 0) {
      this.lastPushPull = now;
      this.resyncAt = undefined;
      this.sendSync(live[Math.floor(this.random() * live.length)] as NodeId, true, out);
    }
  }

  /**
   * A seed found at run time (an address the runtime resolved to its id): asked for its member list
   * now, and again whenever this node is alone. Bounded like the candidates (a seed is only a target).
   */
  addSeed(id: NodeId, out: SwimEffect[]): void {
    if (id === this.selfId || this.seeds.includes(id)) return;
    if (this.seeds.length >= this.config.maxCandidates) return;
    this.seeds.push(id);
    if (!this.members.isLive(id)) this.sendSync(id, true, out);
  }

  /** No live member yet (or all gone): ask the seeds again. */
  join(out: SwimEffect[]): void {
    for (const s of this.seeds) if (s !== this.selfId && !this.members.isLive(s)) this.sendSync(s, true, out);
  }

  /** A push-pull with one remembered dead member: after a partition heals, both sides refute. */
  private reconnect(out: SwimEffect[]): void {
    const m = this.members.randomTombstone();
    // Small on purpose (most remembered dead members are truly dead): ourselves, and its own
    // death, which it refutes if it hears it; only then does it answer with its whole list.
    // One we refused is not told of its death by us: our refusal is ours alone (admissions.ts).
    if (m?.status !== "dead" || this.candidates.isRefused(m.id) || m.putOut === true) return;
    const members = [this.selfUpdate(), { id: m.id, status: m.status, incarnation: m.incarnation }];
    out.push({ type: "send", to: m.id, msg: { type: "sync", members, reply: true } });
  }

  /**
   * Our whole list to `to`; as the answer to its list (`theirs`), only the entries it lacks or holds
   * older: the asker already applied the rest, so re-sending them was most of a forming cluster's
   * push-pull bytes (each list answered is then followed by more, while lists are partial).
   */
  private sendSync(
    to: NodeId,
    reply: boolean,
    out: SwimEffect[],
    theirs?: readonly MemberUpdate[],
    held?: MemberUpdate,
  ): void {
    const members: MemberUpdate[] = [this.selfUpdate()];
    const known = theirs === undefined ? undefined : new Map(theirs.map((u) => [u.id, u]));
    // What we held of the asker, below what it says of itself now: its previous life's, perhaps. A
    // restart booted one above it is taken as a refutation, unchecked, until it hears that record and
    // outbids it by two (self-news.ts); no gossip carries old news, so its join's answer tells it.
    const said = known?.get(to);
    if (held !== undefined && said !== undefined && said.incarnation > held.incarnation) members.push(held);
    for (const m of this.members.values()) {
      const k = known?.get(m.id);
      if (k !== undefined && !newerBelief(m, k)) continue;
      if (this.candidates.isRefused(m.id) || m.putOut === true) continue; // ours, not news (admissions.ts)
      members.push({ id: m.id, status: m.status, incarnation: m.incarnation });
    }
    out.push({ type: "send", to, msg: { type: "sync", members, reply } });
  }
}

const STATUS_RANK: Record<MemberStatus, number> = { alive: 0, suspect: 1, dead: 2, left: 2 };

/** Whether belief `a` overrides `b`: a higher incarnation, or the same with a higher status rank. */
function newerBelief(
  a: { incarnation: number; status: MemberStatus },
  b: { incarnation: number; status: MemberStatus },
): boolean {
  return (
    a.incarnation > b.incarnation ||
    (a.incarnation === b.incarnation && STATUS_RANK[a.status] > STATUS_RANK[b.status])
  );
}
