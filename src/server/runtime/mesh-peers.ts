/**
 * The daemon's side of `gossip: "scuttlebutt"` (the simulator's is src/sim/effects.ts's `mesh-send` and
 * `verify-member`): it carries the node's mesh messages over the peer transport, answers its
 * `verify-member` from authentication, feeds seeds found at run time, and keeps the transport's
 * members (pools, URLs, hellos) in step with SWIM's. Its parts: the verification itself
 * (mesh-verify.ts; which failures refuse: peer-refusal.ts), the hellos of the members SWIM remembers,
 * asked afresh when a live one's incarnation rises past a refutation (member-hellos.ts), the pools to
 * non-members and the timers of left members' (stranger-pools.ts), and the refused messages' counts
 * (mesh-refused.ts).
 *
 * Invariants:
 *  - [Verified by contact] A member is admitted only after this node reached it at an address and it
 *    proved its id there: a certificate from the cluster CA for that id (the pool is pinned to it), or
 *    an HMAC over our fresh challenge under the shared secret (hmac.ts, helloProof), plus a hello of our
 *    cluster (and model). What a relay says — that an id is alive, where it lives — only starts that
 *    check. A definite failure (refused credentials, no proof, another cluster) answers no, with its
 *    reason; SWIM asks again after a growing backoff (swim/candidates.ts), through this same check. An
 *    unreachable address is retried with backoff while the candidate waits. A node with no credential
 *    at all (alone, `admitsNone`) admits nobody: it could not tell a member from anyone else.
 *  - [Addresses are hints] An id's own messages set its address; a relay's only fill an unknown one.
 *  - [Bounded] addresses ≤ maxAddresses, messages in flight per peer ≤ MAX_IN_FLIGHT (more are dropped:
 *    mesh messages are datagrams; our goodbye, one a member, is not), both here; pools to non-members ≤
 *    MAX_STRANGER_POOLS (a member that left keeps its pool LEFT_POOL_MS among them, for its final cancels,
 *    unless it is verified again or its pool is replaced meanwhile: the pool is then no longer the kept one),
 *    stranger-pools.ts; verifications pending ≤ MAX_VERIFYING, mesh-verify.ts; hellos kept ≤ the members
 *    SWIM remembers, member-hellos.ts; senders known to speak a newer protocol ≤ MAX_NEWER_SENDERS (and as
 *    many re-read times), hellos read again for an unknown kind ≤ MAX_PROTOCOL_READS at once, both
 *    mesh-refused.ts.
 *  - [Newer is not invalid] A refused message counts as `unsupported`, not `invalid`, only when both
 *    say a newer build: its sender's last checked hello (authenticated) named a protocol newer than
 *    this build's, and it failed at a kind marker this build does not know (mesh-wire.ts
 *    `unknownKind`), where such a build's new message would. A mesh message carries no version of
 *    its own, so an unknown kind alone cannot tell a newer build from a broken one: from a sender of
 *    our protocol or older, or whose hello this node has not read, it stays `invalid`. SWIM keeps a
 *    member that restarted unseen (an upgrade in place) live while its new life is verified, so the
 *    hello last read may be another build's: an unknown kind from a sender not known newer, or known
 *    so from a hello read PROTOCOL_RECHECK_MS ago or more, has its hello read again (as far apart),
 *    and it and those that come meanwhile are counted on that (mesh-refused.ts).
 */
import type { PrefixNode } from "../../core/node/node.js";
import type { MeshMessage, NodeId, NodeInput } from "../../core/node/types.js";
import { decodeMesh, encodeMesh, type MeshAddress, meshMentions } from "../../net/mesh-wire.js";
import type { PeerClient } from "../../net/transport-client.js";
import type { PeerHello } from "../../net/wire-schemas.js";
import type { NodeMetrics } from "../metrics.js";
import type { Admin } from "./admin.js";
import type { RuntimeLogger } from "./logger.js";
import { MemberHellos } from "./member-hellos.js";
import { RefusedMeshMessages } from "./mesh-refused.js";
import { MemberVerification } from "./mesh-verify.js";
import { StrangerPools } from "./stranger-pools.js";

export const MAX_IN_FLIGHT = 8;

export interface MeshPeersOptions {
  node: PrefixNode;
  client: PeerClient;
  admin: Admin;
  metrics: NodeMetrics;
  logger: RuntimeLogger;
  clusterId: string;
  /** The model a member must serve (undefined: any, `--mixed-models`). */
  helloModel: string | undefined;
  /** Feeds an input to the node (and performs its effects). */
  feed(input: NodeInput): void;
  /** Largest mesh message accepted (a gossip states message carries snapshots). */
  maxMessageBytes: number;
  /** A lone node without credentials (start-node.ts): every candidate is refused, none verified. */
  admitsNone?: boolean;
  /** Addresses remembered at most (default 1024). */
  maxAddresses?: number;
  /** The clock of the protocol re-reads (see [Newer is not invalid]); default Date.now. */
  now?: () => number;
  /** Each member's served count (peer-served.ts): ours rides on our states, theirs is read off theirs. */
  served?: {
    own(): number;
    report(from: NodeId, epoch: number, served: number | undefined): void;
    /** Only the members SWIM remembers keep their count (peer-served.ts `keepOnly`). */
    keepOnly(remembered: ReadonlySet<NodeId>): void;
  };
}

/** How long after a cache reset members are expected back before those missing are said. */
const REJOIN_QUIET_MS = 60_000;
/** Most member ids one log line names. */
const MAX_NAMED = 16;

export class MeshPeers {
  /** This node's own peer URL, carried on every message (set once the peer port listens). */
  selfUrl: string | undefined;
  private readonly book = new Map<NodeId, string>();
  /** Ids the transport holds as members (SWIM's alive and suspect ones). */
  private readonly members = new Set<NodeId>();
  private readonly inFlight = new Map<NodeId, number>();
  private readonly refusedMsgs: RefusedMeshMessages;
  private readonly pools: StrangerPools;
  private readonly verification: MemberVerification;
  private readonly hellos: MemberHellos;
  private stopped = false;
  /** Members held when a cache reset started SWIM's list over, not back yet (see newEpoch). */
  private rejoining: { ids: Map<NodeId, number>; total: number; lateSaid: boolean } | undefined;
  /** Each member's newest epoch its states named (members only: bounded as they are). */
  private readonly epochs = new Map<NodeId, number>();

  constructor(private readonly o: MeshPeersOptions) {
    this.refusedMsgs = new RefusedMeshMessages(o);
    this.pools = new StrangerPools({
      ...o,
      url: (id) => this.book.get(id),
      isMember: (id) => this.members.has(id),
      isVerifying: (id) => this.verification.has(id),
      isSending: (id) => this.inFlight.has(id),
    });
    this.verification = new MemberVerification(o, {
      pool: (id) => this.pools.pool(id),
      noteHello: (id, raw) => this.refusedMsgs.noteProtocol(id, raw),
      isMember: (id) => this.members.has(id),
      verifiedMember: (id, hello) => this.noteHello(id, hello),
      dropStranger: (id, ifIdle) => this.pools.dropStranger(id, ifIdle),
      endLeftPool: (id) => this.pools.endLeftPool(id),
    });
    this.hellos = new MemberHellos(o, {
      isMember: (id) => this.members.has(id),
      noteHello: (id, raw) => this.refusedMsgs.noteProtocol(id, raw),
    });
  }

  /**
   * Mesh messages from an authenticated sender that `onMesh` refused (did not decode, or over the
   * entry bound): SWIM never sees them, so the cluster view adds them to its `invalid` count.
   */
  get refusedMessages(): number {
    return this.refusedMsgs.invalid;
  }

  /**
   * Mesh messages `onMesh` refused because their sender speaks a newer protocol (see [Newer is not
   * invalid]): expected while a rolling upgrade runs, so not among `refusedMessages`.
   */
  get unsupportedMessages(): number {
    return this.refusedMsgs.newerBuilds;
  }

  /**
   * A new epoch (the cache reset's restart): SWIM's counts start over with it, so this one does too,
   * or `invalid` would carry the old epoch's refusals on (and fall, a counter reset, when it had some
   * of SWIM's own).
   */
  newEpoch(): void {
    this.refusedMsgs.newEpoch();
    this.verification.abandonAll(); // the old SWIM's: resetCache calls this before the new one can ask
    // The reset starts SWIM's list over (a crash-restart's, core/node/mesh.ts): every member leaves
    // it now and is back within a join's round trips. Said once, not a leave and a join per member.
    // Those still away from an earlier reset (resets in a row) are awaited too, each until its own
    // reset's time is up (ids: member → when it is said missing), so none is left unsaid.
    this.rejoinDone();
    const now = (this.o.now ?? Date.now)();
    const ids = new Map(this.rejoining?.ids);
    for (const id of this.members) ids.set(id, now + REJOIN_QUIET_MS);
    if (ids.size === 0) return;
    this.rejoining = { ids, total: ids.size, lateSaid: false };
    this.o.logger.info(
      { members: ids.size },
      "cache reset: membership starts over; members not logged as they leave and rejoin",
    );
  }

  /** `id` is reachable at `url`; `own`: said by `id` itself (or configured), which beats a relay. */
  learn(id: NodeId, url: string, own: boolean): void {
    if (id === this.o.node.id) return;
    const cur = this.book.get(id);
    if (cur === url || (cur !== undefined && !own)) return;
    if (cur === undefined && this.book.size >= (this.o.maxAddresses ?? 1024) && !this.evictAddress()) return;
    this.book.set(id, url);
    if (this.o.client.has(id)) {
      this.o.client.setPeer(id, url);
      // A new pool (the old one closes): not the one a leave kept, so that keeping's timer is void.
      this.pools.endLeftPool(id);
    }
    if (this.members.has(id)) this.o.admin.movePeer(id, url);
    // A verification waiting for an address (or stuck at a wrong one) tries the new one now.
    this.verification.addressChanged(id);
  }

  /** A seed found at run time (a `--join` address, a DNS name's address) under its announced id. */
  seed(id: NodeId, url: string): void {
    this.learn(id, url, true);
    this.o.feed({ type: "mesh-seed", id });
  }

  /** The `mesh-send` effect: best effort, dropped when nothing is known of `to` or too much is in flight. */
  send(to: NodeId, msg: MeshMessage): Promise<void> {
    const goodbye = msg.channel === "swim" && msg.msg.type === "goodbye";
    if (this.stopped && !goodbye) return Promise.resolve();
    const n = this.inFlight.get(to) ?? 0;
    // A goodbye goes past the cap (one a member, at shutdown): dropped, a leave looks like a crash to
    // that member, which then declares us dead seconds later and owes our forwards no final cancels.
    if ((n >= MAX_IN_FLIGHT && !goodbye) || !this.pools.pool(to)) return Promise.resolve();
    const body = encodeMesh(this.stampServed(msg), this.addressesFor(msg));
    this.inFlight.set(to, n + 1);
    return this.o.client
      .sendMesh(to, body)
      .then(
        () => this.o.metrics.gossipBytes.inc({ peer: to, direction: "out" }, body.byteLength),
        (err: Error) => this.pools.sendFailed(this.o.logger, to, err),
      )
      .finally(() => {
        const left = (this.inFlight.get(to) ?? 1) - 1;
        if (left > 0) this.inFlight.set(to, left);
        else this.inFlight.delete(to);
      });
  }

  /** The peer server's `onMesh`: decoded, its addresses learned, fed to the node. */
  onMesh(from: NodeId, body: Uint8Array): string | undefined {
    if (this.stopped) return undefined;
    const d = decodeMesh(body, this.o.maxMessageBytes);
    if (!d.ok) return this.refusedMsgs.refuse(from, d.error, d.unknownKind);
    this.o.metrics.gossipBytes.inc({ peer: from, direction: "in" }, body.byteLength);
    this.pools.heard(from);
    for (const a of d.envelope.addrs) this.learn(a.id, a.url, a.id === from);
    const m = d.envelope.msg;
    if (m.channel === "gossip" && m.msg.type === "states")
      for (const { snapshot: s } of m.msg.states) {
        this.o.served?.report(s.header.sender, s.header.epoch, s.header.served);
        this.noteEpoch(s.header.sender, s.header.epoch);
      }
    this.o.feed({ type: "mesh-message", from, msg: d.envelope.msg });
    return undefined;
  }

  /**
   * Member `id`'s hello, proven and checked elsewhere (a DNS round's re-check): noted, and the one
   * remembered should it come back unverified; of an id that is no member, nothing is noted.
   */
  noteHello(id: NodeId, hello: PeerHello): void {
    if (this.stopped || !this.members.has(id)) return;
    this.hellos.remember(id, hello);
    this.o.admin.notePeerHello(id, hello);
  }

  get checksInFlight(): number {
    return this.verification.size;
  }

  /** The `verify-member` effect (see [Verified by contact]). */
  verify(id: NodeId): void {
    this.verification.verify(id);
  }

  /** After each input: members SWIM admitted or dropped get (or lose) their pool, URL and hello. */
  syncMembers(): void {
    const now = new Set<NodeId>();
    const left = new Set<NodeId>();
    const remembered = new Set<NodeId>();
    for (const m of this.o.node.meshMembers() ?? []) {
      remembered.add(m.id);
      if (m.status === "alive" || m.status === "suspect") {
        now.add(m.id);
        // A member live at a higher incarnation (past a refutation) may have restarted unseen, unless
        // SWIM is checking that new life: the verification reads its hello, which is noted if it passes.
        const refresh = this.hellos.outbid(m.id, m.incarnation) && this.members.has(m.id);
        if (refresh && !this.verification.has(m.id)) this.hellos.refresh(m.id);
      } else if (m.status === "left") left.add(m.id);
    }
    this.hellos.keepOnly(remembered);
    this.o.served?.keepOnly(remembered);
    for (const id of now) {
      if (this.members.has(id)) continue;
      const url = this.book.get(id);
      if (url === undefined) continue; // admitted only after a verified contact: cannot happen
      this.members.add(id);
      this.pools.admitted(id);
      this.pools.endLeftPool(id); // back: a member's pool now, which a timer of its leave must not close
      const verified = this.verification.hello(id);
      this.verification.forgetHello(id);
      if (verified) this.hellos.remember(id, verified);
      this.o.admin.meshJoined(id, url, verified ?? this.hellos.get(id) ?? {}, this.rejoined(id));
      // Back with no verification in hand (SWIM verifies one back from dead or left): asked afresh.
      if (!verified) this.hellos.refresh(id);
    }
    for (const id of this.members) {
      if (now.has(id)) continue;
      this.members.delete(id);
      this.epochs.delete(id);
      this.o.admin.meshLeft(id, left.has(id) && !this.stopped && this.pools.keepLeftPool(id));
      if (this.rejoining?.ids.has(id)) this.o.logger.debug({ peer: id }, "member left with the cache reset");
      else this.o.logger.info({ peer: id }, "member left the mesh (dead or departed)");
    }
    this.rejoinDone();
  }

  /**
   * A member's state at `epoch`: a newer epoch than its last is a cache reset or a restart SWIM did
   * not see as a death (it never left our list), said once here, the one line a reset costs a peer.
   */
  private noteEpoch(id: NodeId, epoch: number): void {
    if (!this.members.has(id) || !Number.isSafeInteger(epoch)) return;
    const seen = this.epochs.get(id);
    if (seen !== undefined && epoch <= seen) return;
    this.epochs.set(id, epoch);
    if (seen !== undefined)
      this.o.logger.info({ peer: id, epoch }, "member reset its cache or restarted (a new epoch)");
  }

  /** Whether `id`'s join is its return after our cache reset (then logged quietly). */
  private rejoined(id: NodeId): boolean {
    return this.rejoining?.ids.delete(id) ?? false;
  }

  /**
   * Ends the quiet rejoin once every member is back (one line), and says those whose time is up
   * (one line per check that finds any).
   */
  private rejoinDone(): void {
    const r = this.rejoining;
    if (r === undefined) return;
    const now = (this.o.now ?? Date.now)();
    const missing = [...r.ids].filter(([, until]) => now >= until).map(([id]) => id);
    for (const id of missing) r.ids.delete(id);
    if (r.ids.size === 0) this.rejoining = undefined;
    if (missing.length > 0) {
      r.lateSaid = true;
      // Those not back are logged as any member leaving is (at most a few named: a big mesh's list).
      this.o.logger.info(
        { members: r.total, missing: missing.length, peers: missing.slice(0, MAX_NAMED) },
        "cache reset: members not back since the reset (dead or departed)",
      );
    } else if (r.ids.size === 0 && !r.lateSaid)
      this.o.logger.info({ members: r.total }, "cache reset: every member rejoined");
  }

  stop(): void {
    this.stopped = true;
    this.rejoining = undefined; // no "members not back" line from a node shutting down
    this.verification.stop();
    this.hellos.stop();
    this.pools.stop();
  }

  /** What `/cluster` shows of the mesh's addresses (for operators; not the member list). */
  addresses(): Record<NodeId, string> {
    return Object.fromEntries(this.book);
  }

  // ---------------------------------------------------------------- internals
  /**
   * Our served count on our own states (copies: the node keeps the originals). Relays pass the
   * header on as received, so a count reaches every holder of our estimate, as old as our newest state.
   */
  private stampServed(msg: MeshMessage): MeshMessage {
    const served = this.o.served;
    if (served === undefined || msg.channel !== "gossip" || msg.msg.type !== "states") return msg;
    const self = this.o.node.id;
    if (!msg.msg.states.some((s) => s.snapshot.header.sender === self)) return msg;
    const n = served.own();
    const states = msg.msg.states.map((s) =>
      s.snapshot.header.sender !== self
        ? s
        : { ...s, snapshot: { ...s.snapshot, header: { ...s.snapshot.header, served: n } } },
    );
    return { channel: "gossip", msg: { ...msg.msg, states } };
  }

  /**
   * Our own address, then those of the members the message names (bounded by mesh-wire.ts). None on
   * anti-entropy: it goes only to members, who hold our address already.
   */
  private addressesFor(msg: MeshMessage): MeshAddress[] {
    const out: MeshAddress[] = [];
    if (msg.channel === "gossip") return out;
    if (this.selfUrl !== undefined) out.push({ id: this.o.node.id, url: this.selfUrl });
    for (const id of meshMentions(msg)) {
      const url = this.book.get(id);
      if (url !== undefined) out.push({ id, url });
    }
    return out;
  }

  /** Forgets one address of a node that is neither a member nor being verified; false if none. */
  private evictAddress(): boolean {
    for (const id of this.book.keys()) {
      if (this.members.has(id) || this.verification.has(id) || this.pools.has(id)) continue;
      this.book.delete(id);
      return true;
    }
    return false;
  }
}

/** Whether an input can change SWIM's members (a mesh message, a verification, a seed, a swim timer). */
export function movesMembers(input: NodeInput): boolean {
  const t = input.type;
  return (
    t === "mesh-message" ||
    t === "member-verified" ||
    t === "mesh-seed" ||
    (t === "timer" && input.timer.kind === "swim")
  );
}
