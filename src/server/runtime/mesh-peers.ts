/**
 * The daemon's side of `gossip: "scuttlebutt"` (the simulator's is src/sim/effects.ts's `mesh-send` and
 * `verify-member`): it carries the node's mesh messages over the peer transport, answers its
 * `verify-member` from authentication, feeds seeds found at run time, and keeps the transport's
 * members (pools, URLs, hellos) in step with SWIM's.
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
 *  - [Bounded] addresses ≤ maxAddresses, pools to non-members ≤ MAX_STRANGER_POOLS (a member that
 *    left keeps its pool LEFT_POOL_MS among them, for its final cancels, unless it is verified
 *    again or its pool is replaced meanwhile: the pool is then no longer the kept one), messages in
 *    flight per peer ≤ MAX_IN_FLIGHT (more are dropped: mesh messages are datagrams), verifications
 *    pending ≤ MAX_VERIFYING, senders known to speak a newer protocol ≤ MAX_NEWER_SENDERS (and as
 *    many re-read times), hellos read again for an unknown kind ≤ MAX_PROTOCOL_READS at once.
 *  - [Newer is not invalid] A refused message counts as `unsupported`, not `invalid`, only when both
 *    say a newer build: its sender's last checked hello (authenticated) named a protocol newer than
 *    this build's, and it failed at a kind marker this build does not know (mesh-wire.ts
 *    `unknownKind`), where such a build's new message would. A mesh message carries no version of
 *    its own, so an unknown kind alone cannot tell a newer build from a broken one: from a sender of
 *    our protocol or older, or whose hello this node has not read, it stays `invalid`. SWIM takes a
 *    member that restarted (an upgrade in place) back with no new verification, so the hello last
 *    read may be another build's: an unknown kind from a sender not known newer, or known so from a
 *    hello read PROTOCOL_RECHECK_MS ago or more, has its hello read again (as far apart), and it and
 *    those that come meanwhile are counted on that.
 */
import type { PrefixNode } from "../../core/node/node.js";
import type { MeshMessage, NodeId, NodeInput } from "../../core/node/types.js";
import { CLOCK_SKEW, MAX_REFUSALS } from "../../core/refusals.js";
import { skewAdvice } from "../../net/clock-skew.js";
import { checkPeerHello } from "../../net/discovery.js";
import { decodeMesh, encodeMesh, type MeshAddress, meshMentions } from "../../net/mesh-wire.js";
import { BUILD_RANGE } from "../../net/protocol-range.js";
import { type PeerClient, TransportError } from "../../net/transport-client.js";
import { helloSchema, type PeerHello } from "../../net/wire-schemas.js";
import type { NodeMetrics } from "../metrics.js";
import type { Admin } from "./admin.js";
import type { RuntimeLogger } from "./logger.js";

export const MAX_IN_FLIGHT = 8;
export const MAX_STRANGER_POOLS = 64;
export const MAX_VERIFYING = 256;
/** Senders remembered as speaking a newer protocol than this build (see `unsupportedMessages`). */
export const MAX_NEWER_SENDERS = 1024;
/** Hellos read again at once for an unknown kind (see [Newer is not invalid]); past it, counted as read. */
export const MAX_PROTOCOL_READS = 64;
/** How long after such a re-read a sender's unknown kinds are counted on it, with no new read. */
export const PROTOCOL_RECHECK_MS = 30_000;
/**
 * How long a member that left (its goodbye) keeps its pool as a stranger's: the final cancels it is
 * owed go when it leaves (no answer of a non-member is taken: forward-attempts.ts `departed`), so
 * this need only carry them, and a short hold keeps left members from filling the stranger pools
 * that joiners need.
 */
export const LEFT_POOL_MS = 10_000;
/** Backoff of a verification whose address did not answer: doubling from the first, up to the cap. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 10_000;

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
  served?: { own(): number; report(from: NodeId, epoch: number, served: number | undefined): void };
}

interface Verifying {
  attempts: number;
  timer: NodeJS.Timeout | undefined;
  running: boolean;
}

export class MeshPeers {
  /** This node's own peer URL, carried on every message (set once the peer port listens). */
  selfUrl: string | undefined;
  private readonly book = new Map<NodeId, string>();
  /** Ids the transport holds as members (SWIM's alive and suspect ones). */
  private readonly members = new Set<NodeId>();
  /** Non-members with a pool (seeds, joiners we answer, candidates being verified). */
  private readonly strangers = new Set<NodeId>();
  private readonly verifying = new Map<NodeId, Verifying>();
  /** Verified hellos, until SWIM admits their member. */
  private readonly hellos = new Map<NodeId, PeerHello>();
  private readonly inFlight = new Map<NodeId, number>();
  /** Members that left, their pools kept until these timers fire (LEFT_POOL_MS). */
  private readonly leftPools = new Map<NodeId, NodeJS.Timeout>();
  /** Members refused for clock skew and warned of: said once each (its re-checks go on), until admitted. */
  private readonly skewWarned = new Set<NodeId>();
  /** Senders whose last checked hello named a protocol newer than ours: the newest it named, and when. */
  private readonly newer = new Map<NodeId, { protocol: number; at: number }>();
  /** Senders whose hello is being read again for an unknown kind: the refusals waiting on it. */
  private readonly protocolReads = new Map<NodeId, number>();
  /** When each sender's hello was last read again for one (PROTOCOL_RECHECK_MS apart). */
  private readonly protocolReadAt = new Map<NodeId, number>();
  /** Moves with each epoch: a re-read's refusals are counted only in the epoch they came in. */
  private epoch = 0;
  private stopped = false;
  private refused = 0;
  private unsupported = 0;

  constructor(private readonly o: MeshPeersOptions) {}

  /**
   * Mesh messages from an authenticated sender that `onMesh` refused (did not decode, or over the
   * entry bound): SWIM never sees them, so the cluster view adds them to its `invalid` count.
   */
  get refusedMessages(): number {
    return this.refused;
  }

  /**
   * Mesh messages `onMesh` refused because their sender speaks a newer protocol (see [Newer is not
   * invalid]): expected while a rolling upgrade runs, so not among `refusedMessages`.
   */
  get unsupportedMessages(): number {
    return this.unsupported;
  }

  /**
   * A new epoch (the cache reset's restart): SWIM's counts start over with it, so this one does too,
   * or `invalid` would carry the old epoch's refusals on (and fall, a counter reset, when it had some
   * of SWIM's own).
   */
  newEpoch(): void {
    this.refused = 0;
    this.unsupported = 0;
    this.epoch++;
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
      this.endLeftPool(id);
    }
    if (this.members.has(id)) this.o.admin.movePeer(id, url);
    // A verification waiting for an address (or stuck at a wrong one) tries the new one now.
    const v = this.verifying.get(id);
    if (v !== undefined && !v.running) this.attempt(id, v);
  }

  /** A seed found at run time (a `--join` address, a DNS name's address) under its announced id. */
  seed(id: NodeId, url: string): void {
    this.learn(id, url, true);
    this.o.feed({ type: "mesh-seed", id });
  }

  /** The `mesh-send` effect: best effort, dropped when nothing is known of `to` or too much is in flight. */
  send(to: NodeId, msg: MeshMessage): Promise<void> {
    if (this.stopped && !(msg.channel === "swim" && msg.msg.type === "goodbye")) return Promise.resolve();
    const n = this.inFlight.get(to) ?? 0;
    if (n >= MAX_IN_FLIGHT || !this.pool(to)) return Promise.resolve();
    const body = encodeMesh(this.stampServed(msg), this.addressesFor(msg));
    this.inFlight.set(to, n + 1);
    return this.o.client
      .sendMesh(to, body)
      .then(
        () => this.o.metrics.gossipBytes.inc({ peer: to, direction: "out" }, body.byteLength),
        (err: Error) => this.o.logger.debug({ peer: to, err: err.message }, "mesh message not delivered"),
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
    if (!d.ok) {
      const known = d.unknownKind ? this.newer.get(from) : undefined;
      // Not known newer, or known from a hello read a while ago (it may have restarted on another
      // build since, which SWIM takes back unchecked): read it again first.
      const stale = known === undefined || this.now() - known.at >= PROTOCOL_RECHECK_MS;
      if (d.unknownKind && stale && this.rereadProtocol(from)) {
        this.o.logger.debug({ peer: from, err: d.error }, "mesh message of an unknown kind refused");
        return d.error;
      }
      const newer = known?.protocol;
      if (newer !== undefined) {
        // A newer build's message (see [Newer is not invalid]): a rolling upgrade, not a fault.
        this.unsupported++;
        const why = `${d.error} (its sender speaks protocol ${newer}, this node ${BUILD_RANGE.max})`;
        this.o.logger.debug({ peer: from, err: why }, "mesh message of a newer protocol refused");
        return why;
      }
      // Only an authenticated sender reaches here (the peer port's auth runs first), so this is a
      // node sending garbage: worth an operator's alert, unlike a stranger's (auth-rejected).
      this.refused++;
      this.o.logger.debug({ peer: from, err: d.error }, "mesh message refused");
      return d.error;
    }
    this.o.metrics.gossipBytes.inc({ peer: from, direction: "in" }, body.byteLength);
    for (const a of d.envelope.addrs) this.learn(a.id, a.url, a.id === from);
    const m = d.envelope.msg;
    if (m.channel === "gossip" && m.msg.type === "states")
      for (const { snapshot: s } of m.msg.states)
        this.o.served?.report(s.header.sender, s.header.epoch, s.header.served);
    this.o.feed({ type: "mesh-message", from, msg: d.envelope.msg });
    return undefined;
  }

  /** The `verify-member` effect (see [Verified by contact]). */
  verify(id: NodeId): void {
    if (this.verifying.has(id) || this.stopped) return;
    if (this.o.admitsNone) {
      // Warned once at start; each refusal is counted (prefixmesh_peer_auth_rejected_total{reason="mesh-verify"}).
      this.o.logger.debug({ peer: id }, "mesh member refused: this node has no peer authentication");
      // Answered as an input, never inside this effect.
      queueMicrotask(() => this.settle(id, false, undefined, "this node has no peer authentication"));
      return;
    }
    if (this.verifying.size >= MAX_VERIFYING) {
      // Never admitted without an answer; the core's candidate waits (bounded there).
      this.o.logger.warn({ peer: id }, "too many members being verified: not verifying this one now");
      return;
    }
    const v: Verifying = { attempts: 0, timer: undefined, running: false };
    this.verifying.set(id, v);
    // Back within LEFT_POOL_MS (restarted): the kept pool now carries its verification, which its
    // leave's timer must not cut; a failed verification drops it as any stranger's (settle).
    this.endLeftPool(id);
    this.attempt(id, v);
  }

  /** After each input: members SWIM admitted or dropped get (or lose) their pool, URL and hello. */
  syncMembers(): void {
    const now = new Set<NodeId>();
    const left = new Set<NodeId>();
    for (const m of this.o.node.meshMembers() ?? []) {
      if (m.status === "alive" || m.status === "suspect") now.add(m.id);
      else if (m.status === "left") left.add(m.id);
    }
    for (const id of now) {
      if (this.members.has(id)) continue;
      const url = this.book.get(id);
      if (url === undefined) continue; // admitted only after a verified contact: cannot happen
      this.members.add(id);
      this.strangers.delete(id);
      this.endLeftPool(id); // back: a member's pool now, which a timer of its leave must not close
      this.o.admin.meshJoined(id, url, this.hellos.get(id) ?? {});
      this.hellos.delete(id);
    }
    for (const id of this.members) {
      if (now.has(id)) continue;
      this.members.delete(id);
      this.o.admin.meshLeft(id, left.has(id) && this.keepLeftPool(id));
      this.o.logger.info({ peer: id }, "member left the mesh (dead or departed)");
    }
  }

  stop(): void {
    this.stopped = true;
    for (const v of this.verifying.values()) clearTimeout(v.timer);
    this.verifying.clear();
    for (const t of this.leftPools.values()) clearTimeout(t);
    this.leftPools.clear();
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

  private attempt(id: NodeId, v: Verifying): void {
    clearTimeout(v.timer);
    v.timer = undefined;
    if (this.stopped || !this.pool(id)) {
      this.retry(id, v); // no address (yet)
      return;
    }
    v.running = true;
    this.o.client.verifiedHello(id).then(
      (hello) => {
        v.running = false;
        this.noteProtocol(id, hello);
        const r = checkPeerHello(
          {
            cluster: this.o.clusterId,
            model: this.o.helloModel,
            self: this.o.node.id,
            peerId: id,
            authMode: this.o.client.authMode,
            // A full-mesh node answers hellos but no SWIM: a relay's mention of one admits nothing.
            gossip: this.o.node.config.gossip,
          },
          hello,
        );
        // Another id answered there: the address is stale or a relay's mistake, not a verdict on `id`.
        if (r.ok || (r.reason !== "wrong-id" && r.reason !== "self")) {
          if (!r.ok) this.o.logger.warn({ peer: id, reason: r.reason }, `mesh member refused: ${r.message}`);
          this.settle(id, r.ok, r.ok ? r.hello : undefined, r.ok ? undefined : `${r.reason}: ${r.message}`);
        } else this.retry(id, v);
      },
      (err: unknown) => {
        v.running = false;
        if (!refusedNow(err, v.attempts)) {
          if (err instanceof TransportError && err.unauthenticated && v.attempts === 0)
            this.o.logger.warn(
              { peer: id, err: err.message },
              "mesh member not verified yet: its answer is not authenticated (another shared secret, or altered on the path)",
            );
          return void this.retry(id, v);
        }
        const skew = err instanceof TransportError ? err.clockSkewMs : undefined;
        if (skew !== undefined) {
          const fields = { peer: id, skewS: Math.round(skew / 1000) };
          // Bounded like the refusals it mirrors: past the bound, a warning per re-check again.
          if (this.skewWarned.has(id)) this.o.logger.debug(fields, "mesh member still refuses our clock");
          else {
            if (this.skewWarned.size < MAX_REFUSALS) this.skewWarned.add(id);
            this.o.logger.warn(
              fields,
              `mesh member refused our signed requests: ${skewAdvice(skew, "member")}`,
            );
          }
          return void this.settle(id, false, undefined, `${CLOCK_SKEW}: ${(err as Error).message}`);
        }
        this.o.logger.warn({ peer: id, err: (err as Error).message }, "mesh member refused: no credential");
        this.settle(id, false, undefined, `no-credential: ${(err as Error).message}`);
      },
    );
  }

  /**
   * Whether `id`'s hello (proven its: verifiedHello) names a protocol newer than this build's, kept
   * for [Newer is not invalid] whatever the check then decides (a build wholly newer is refused as a
   * member, and may still send us mesh messages). Bounded: the oldest noted goes first.
   */
  private noteProtocol(id: NodeId, raw: unknown): void {
    const h = helloSchema.safeParse(raw);
    if (!h.success || h.data.id !== id) return;
    this.newer.delete(id);
    if (h.data.protocol <= BUILD_RANGE.max) return;
    if (this.newer.size >= MAX_NEWER_SENDERS) {
      const oldest = this.newer.keys().next().value;
      if (oldest !== undefined) this.newer.delete(oldest);
    }
    this.newer.set(id, { protocol: h.data.protocol, at: this.now() });
  }

  /**
   * An unknown kind from `from`, not known (lately) to speak a newer protocol: counted once its hello
   * is read again (see [Newer is not invalid]); false if it is not read now (counted on what is known).
   */
  private rereadProtocol(from: NodeId): boolean {
    const waiting = this.protocolReads.get(from);
    if (waiting !== undefined) {
      this.protocolReads.set(from, waiting + 1);
      return true;
    }
    const now = this.now();
    const last = this.protocolReadAt.get(from);
    if (last !== undefined && now - last < PROTOCOL_RECHECK_MS) return false;
    if (this.protocolReads.size >= MAX_PROTOCOL_READS || !this.o.client.has(from)) return false;
    this.protocolReadAt.delete(from);
    if (this.protocolReadAt.size >= MAX_NEWER_SENDERS) {
      const oldest = this.protocolReadAt.keys().next().value;
      if (oldest !== undefined) this.protocolReadAt.delete(oldest);
    }
    this.protocolReadAt.set(from, now);
    this.protocolReads.set(from, 1);
    const epoch = this.epoch;
    const count = () => {
      const n = this.protocolReads.get(from) ?? 0;
      this.protocolReads.delete(from);
      if (epoch !== this.epoch) return;
      if (this.newer.has(from)) this.unsupported += n;
      else this.refused += n;
    };
    this.o.client.verifiedHello(from).then(
      (hello) => {
        this.noteProtocol(from, hello);
        count();
      },
      count, // unreachable or unproven: what it sent stays garbage
    );
    return true;
  }

  private now(): number {
    return (this.o.now ?? Date.now)();
  }

  private retry(id: NodeId, v: Verifying): void {
    if (this.stopped || this.verifying.get(id) !== v) return;
    const ms = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** v.attempts++);
    v.timer = setTimeout(() => this.attempt(id, v), ms);
    v.timer.unref?.();
  }

  private settle(id: NodeId, ok: boolean, hello?: PeerHello, reason?: string): void {
    this.verifying.delete(id);
    if (this.stopped) return;
    if (ok && hello) this.hellos.set(id, hello);
    if (ok) this.skewWarned.delete(id);
    this.o.feed({ type: "member-verified", id, ok, ...(reason !== undefined ? { reason } : {}) });
    if (!ok) {
      this.hellos.delete(id);
      this.dropStranger(id);
      this.o.metrics.authRejected.inc({ reason: "mesh-verify" });
    } else if (!this.members.has(id)) this.hellos.delete(id); // not admitted after all (table full)
  }

  /** A pool to `id` (one is made for a stranger within the bound); false if none can be had. */
  private pool(id: NodeId): boolean {
    if (this.o.client.has(id)) return true;
    const url = this.book.get(id);
    if (url === undefined) return false;
    if (!this.members.has(id)) {
      if (this.strangers.size >= MAX_STRANGER_POOLS) return false;
      this.strangers.add(id);
    }
    this.o.client.setPeer(id, url);
    return true;
  }

  /**
   * A member that left drains what it took: its pool stays, as a stranger's (within that bound), for
   * the final cancels it is owed, then goes. The node sends it nothing else: it is no member.
   */
  private keepLeftPool(id: NodeId): boolean {
    if (this.stopped || !this.o.client.has(id)) return false;
    if (!this.strangers.has(id) && this.strangers.size >= MAX_STRANGER_POOLS) return false;
    this.strangers.add(id);
    clearTimeout(this.leftPools.get(id));
    const timer = setTimeout(() => {
      this.leftPools.delete(id);
      if (!this.members.has(id) && !this.verifying.has(id)) this.dropStranger(id);
    }, LEFT_POOL_MS);
    timer.unref?.();
    this.leftPools.set(id, timer);
    return true;
  }

  private endLeftPool(id: NodeId): void {
    clearTimeout(this.leftPools.get(id));
    this.leftPools.delete(id);
  }

  private dropStranger(id: NodeId): void {
    if (!this.strangers.delete(id)) return;
    this.o.client.removePeer(id);
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
      if (this.members.has(id) || this.verifying.has(id) || this.strangers.has(id)) continue;
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

/** Tries a refusal without a valid response MAC is retried before it is taken as the node's. */
export const UNAUTHENTICATED_TRIES = 4;

/**
 * Whether a verification that failed with `err` after `attempts` earlier tries refuses the candidate
 * now. A refusal is remembered (SWIM's candidates ask again only after a backoff), and in shared-secret mode one
 * without a valid response MAC may be an on-path party's, not the node's: it is taken only when every
 * one of UNAUTHENTICATED_TRIES tries, over a few seconds of backoff, said it (a node holding another
 * secret says so at each), so one forged answer cannot shut a member out for good.
 */
export function refusedNow(err: unknown, attempts: number): boolean {
  if (!definiteRefusal(err)) return false;
  return !(err as TransportError).unauthenticated || attempts + 1 >= UNAUTHENTICATED_TRIES;
}

/**
 * Whether a failed hello proves the far node lacks our cluster's credential: it refused ours (401,
 * 403), answered without a valid proof, or presented a certificate the cluster CA did not issue for
 * that id. Anything else (refused connection, timeout) may pass: retried.
 */
export function definiteRefusal(err: unknown): boolean {
  if (!(err instanceof TransportError)) return false;
  if (err.kind === "http") return err.status === 401 || err.status === 403;
  if (err.kind === "protocol") return true;
  return /certificate|CERT_|ALTNAME|UNKNOWN_CA|self.signed/i.test(err.message);
}
