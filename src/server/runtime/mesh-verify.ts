/**
 * SWIM's `verify-member` effect answered for mesh-peers.ts: a hello from the candidate's address,
 * checked, retried with backoff while the address does not answer, and fed back as `member-verified`.
 * A candidate's, or a live member's new life's (a restart SWIM never saw as a death): a refusal puts
 * that member out, a yes notes its new hello.
 *
 * Invariants:
 *  - [Verified by contact] (mesh-peers.ts) is decided here: a candidate is answered yes only after its
 *    hello at its address proved its id and passed `checkPeerHello`; a definite failure answers no,
 *    with its reason; an unreachable address, or another id answering there, is retried with backoff.
 *  - [Bounded] verifications pending ≤ MAX_VERIFYING, each tried at most MAX_TRIES times per address
 *    (tries start over at a new one, at most MAX_ADDRESS_RESETS times), then answered no
 *    ("unreachable"): a check the core dropped meanwhile (the member died, left, was pruned) must not
 *    hold a slot for good, and a refusal's backoff in the core asks again later.
 *  - [Answered] every `verify-member` is answered: one past MAX_VERIFYING is answered no ("busy"). SWIM's
 *    `maxCandidates` is bounded (swim/config.ts) so its own checks never reach that bound.
 *  - [One SWIM] a cache reset's new SWIM (core/node/mesh.ts) is answered only checks it asked for: the
 *    old one's are dropped unanswered at the reset (`abandonAll`, before the new one can ask any), their
 *    late answers ignored.
 */
import type { PrefixNode } from "../../core/node/node.js";
import { MAX_VERIFICATIONS } from "../../core/node/swim/config.js";
import { VERIFY_MAX_TRIES, verifyRetryMs } from "../../core/node/swim/verify-retry.js";
import type { NodeId, NodeInput } from "../../core/node/types.js";
import { CLOCK_SKEW, MAX_REFUSALS } from "../../core/refusals.js";
import { skewAdvice } from "../../net/clock-skew.js";
import { checkPeerHello, type HelloCheck } from "../../net/discovery.js";
import { type PeerClient, TransportError } from "../../net/transport-client.js";
import type { PeerHello } from "../../net/wire-schemas.js";
import type { NodeMetrics } from "../metrics.js";
import type { RuntimeLogger } from "./logger.js";
import { refusedNow } from "./peer-refusal.js";

/** SWIM's bound (swim/config.ts): its `maxCandidates` is bounded so its checks in flight fit. */
export const MAX_VERIFYING = MAX_VERIFICATIONS;
/** Tries of an address that does not answer before it is answered no (the schedule: swim/verify-retry.ts). */
export const MAX_TRIES = VERIFY_MAX_TRIES;
/**
 * Times a verification's tries start over at a new address (a member that moved is judged on its new
 * one, not on tries made to its old): bounded, so an id whose address keeps changing is still answered.
 */
export const MAX_ADDRESS_RESETS = 3;

/** What verification needs of mesh-peers.ts' options (MeshPeersOptions has them all). */
export interface MemberVerificationOptions {
  node: PrefixNode;
  client: PeerClient;
  metrics: NodeMetrics;
  logger: RuntimeLogger;
  clusterId: string;
  helloModel: string | undefined;
  feed(input: NodeInput): void;
  admitsNone?: boolean;
}

/** What verification needs of the rest of mesh-peers.ts. */
export interface VerificationHooks {
  /** A pool to `id`; false if none can be had (no address yet, or the stranger bound is reached). */
  pool(id: NodeId): boolean;
  /** `id`'s hello, proven its, before it is checked (the newer-protocol senders: mesh-refused.ts). */
  noteHello(id: NodeId, raw: unknown): void;
  isMember(id: NodeId): boolean;
  /** A live member's new life verified (SWIM checks a restart it never saw as a death): its hello. */
  verifiedMember(id: NodeId, hello: PeerHello): void;
  /** `ifIdle`: not while a message on its way or a left member's hold uses the pool. */
  dropStranger(id: NodeId, ifIdle?: boolean): void;
  endLeftPool(id: NodeId): void;
}

interface Verifying {
  attempts: number;
  /** Times `attempts` started over at a new address (at most MAX_ADDRESS_RESETS). */
  resets: number;
  timer: NodeJS.Timeout | undefined;
  running: boolean;
}

/** `hello`, proven `id`'s, checked as a member's must pass (our cluster, model and gossip mode). */
export function checkMemberHello(
  o: Pick<MemberVerificationOptions, "node" | "client" | "clusterId" | "helloModel">,
  id: NodeId,
  hello: unknown,
): HelloCheck {
  return checkPeerHello(
    {
      cluster: o.clusterId,
      model: o.helloModel,
      self: o.node.id,
      peerId: id,
      authMode: o.client.authMode,
      // A full-mesh node answers hellos but no SWIM: a relay's mention of one admits nothing.
      gossip: o.node.config.gossip,
    },
    hello,
  );
}

export class MemberVerification {
  private readonly verifying = new Map<NodeId, Verifying>();
  /** Verified hellos, until SWIM admits their member. */
  private readonly hellos = new Map<NodeId, PeerHello>();
  /** Members refused for clock skew and warned of: said once each (its re-checks go on), until admitted. */
  private readonly skewWarned = new Set<NodeId>();
  private stopped = false;

  constructor(
    private readonly o: MemberVerificationOptions,
    private readonly hooks: VerificationHooks,
  ) {}

  has(id: NodeId): boolean {
    return this.verifying.has(id);
  }

  /** Checks in flight (at most MAX_VERIFYING). */
  get size(): number {
    return this.verifying.size;
  }

  /** `id`'s verified hello, until its member is admitted (or not). */
  hello(id: NodeId): PeerHello | undefined {
    return this.hellos.get(id);
  }

  forgetHello(id: NodeId): void {
    this.hellos.delete(id);
  }

  /**
   * A new address for `id`: a verification waiting for one (or stuck at a wrong one) tries it now,
   * with its tries started over (those made to the old address say nothing of the new one).
   */
  addressChanged(id: NodeId): void {
    const v = this.verifying.get(id);
    if (v === undefined) return;
    if (v.attempts > 0 && v.resets < MAX_ADDRESS_RESETS) {
      v.resets++;
      v.attempts = 0;
    }
    if (!v.running) this.attempt(id, v);
  }

  /** The `verify-member` effect (see [Verified by contact]). */
  verify(id: NodeId): void {
    if (this.verifying.has(id) || this.stopped) return;
    if (this.o.admitsNone) {
      // Warned once at start; each refusal is counted
      // (prefixmesh_peer_auth_rejected_total{reason="mesh-verify"}).
      this.o.logger.debug({ peer: id }, "mesh member refused: this node has no peer authentication");
      // Answered as an input, never inside this effect.
      queueMicrotask(() => this.settle(id, false, undefined, "this node has no peer authentication"));
      return;
    }
    if (this.verifying.size >= MAX_VERIFYING) {
      // Answered no (as an input), not left unanswered: the core's check would wait for good, pinning
      // its own slot; refused, it is asked again after the core's backoff.
      this.o.logger.warn({ peer: id }, "too many members being verified: not verifying this one now");
      queueMicrotask(() => {
        if (!this.verifying.has(id))
          this.settle(id, false, undefined, "busy: too many members being verified", false);
      });
      return;
    }
    const v: Verifying = { attempts: 0, resets: 0, timer: undefined, running: false };
    this.verifying.set(id, v);
    // Back within LEFT_POOL_MS (restarted): the kept pool now carries its verification, which its
    // leave's timer must not cut; a failed verification drops it as any stranger's (settle).
    this.hooks.endLeftPool(id);
    this.attempt(id, v);
  }

  /**
   * A cache reset: the new SWIM counts only its own checks against MAX_VERIFYING, so the old one's
   * must free their slots now, not after all their tries; their answers would reach a SWIM that never
   * asked (one asking again gets a fresh check). Dropping them, rather than bounding the two SWIMs
   * together, keeps one bound that one SWIM's `maxCandidates` fits. A stranger's pool (and socket) closes
   * unless a message on its way (an answer to a joiner) or a left member's hold still needs it; those
   * close as any stranger's would.
   */
  abandonAll(): void {
    const ids = [...this.verifying.keys()];
    for (const v of this.verifying.values()) clearTimeout(v.timer);
    this.verifying.clear();
    for (const id of ids) this.hooks.dropStranger(id, true);
  }

  stop(): void {
    this.stopped = true;
    for (const v of this.verifying.values()) clearTimeout(v.timer);
    this.verifying.clear();
  }

  private attempt(id: NodeId, v: Verifying): void {
    clearTimeout(v.timer);
    v.timer = undefined;
    if (this.stopped || !this.hooks.pool(id)) {
      this.retry(id, v); // no address (yet)
      return;
    }
    v.running = true;
    this.o.client.verifiedHello(id).then(
      (hello) => {
        v.running = false;
        if (this.verifying.get(id) !== v) return; // abandoned (a reset, a stop): its answer says nothing now
        this.hooks.noteHello(id, hello);
        const r = checkMemberHello(this.o, id, hello);
        // Another id answered there: the address is stale or a relay's mistake, not a verdict on `id`.
        if (r.ok || (r.reason !== "wrong-id" && r.reason !== "self")) {
          if (!r.ok) this.o.logger.warn({ peer: id, reason: r.reason }, `mesh member refused: ${r.message}`);
          this.settle(id, r.ok, r.ok ? r.hello : undefined, r.ok ? undefined : `${r.reason}: ${r.message}`);
        } else this.retry(id, v);
      },
      (err: unknown) => {
        v.running = false;
        if (this.verifying.get(id) !== v) return;
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

  private retry(id: NodeId, v: Verifying): void {
    if (this.stopped || this.verifying.get(id) !== v) return;
    const ms = verifyRetryMs(v.attempts);
    if (ms === undefined) {
      this.o.logger.warn(
        { peer: id, tries: MAX_TRIES },
        "mesh member not verified: its address does not answer",
      );
      return void this.settle(id, false, undefined, `unreachable: no answer in ${MAX_TRIES} tries`, false);
    }
    v.attempts++;
    v.timer = setTimeout(() => this.attempt(id, v), ms);
    v.timer.unref?.();
  }

  /** `rejected`: a verdict on its credential (counted), not an address that never answered. */
  private settle(id: NodeId, ok: boolean, hello?: PeerHello, reason?: string, rejected = true): void {
    this.verifying.delete(id);
    if (this.stopped) return;
    if (ok && hello) this.hellos.set(id, hello);
    if (ok) this.skewWarned.delete(id);
    this.o.feed({
      type: "member-verified",
      id,
      ok,
      ...(reason !== undefined ? { reason } : {}),
      // Its own word on its incarnation: a check held it at a relay's claim, which may be forged.
      ...(ok && hello?.incarnation !== undefined ? { incarnation: hello.incarnation } : {}),
    });
    if (!ok) {
      // A candidate's pool goes as a stranger's; a live member refused (its new life failed) left the
      // members with the feed above, its pool closed there (syncMembers), so this finds none.
      this.hellos.delete(id);
      this.hooks.dropStranger(id);
      if (rejected) this.o.metrics.authRejected.inc({ reason: "mesh-verify" });
      return;
    }
    // Still here after the feed: not a join (whose sync took it), so a live member's new life, or
    // not admitted after all (table full).
    const kept = this.hellos.get(id);
    this.hellos.delete(id);
    if (kept !== undefined && this.hooks.isMember(id)) this.hooks.verifiedMember(id, kept);
  }
}
