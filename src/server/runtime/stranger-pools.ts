/**
 * The transport pools mesh-peers.ts holds to non-members (seeds, joiners it answers, candidates being
 * verified, members that left), within MAX_STRANGER_POOLS, and the timers that close a left member's.
 *
 * Invariant [Bounded] (mesh-peers.ts): pools to non-members ≤ MAX_STRANGER_POOLS, a left member's
 * kept LEFT_POOL_MS among them unless it is verified again or its pool is replaced meanwhile. At the
 * bound, the pool used longest ago that carries no verification, message on its way or left member's
 * hold makes room: pools to strangers are otherwise closed only on admission or refusal, and those
 * that never end so (a joiner answered once, a verification whose yes SWIM ignored) would lock new
 * joiners out.
 */
import type { NodeId } from "../../core/node/types.js";
import type { PeerClient } from "../../net/transport-client.js";
import { TransportError } from "../../net/transport-error.js";
import { certRefusalsOf } from "./cert-refusals.js";
import type { RuntimeLogger } from "./logger.js";
import { UndeliveredMesh } from "./undelivered-mesh.js";

export const MAX_STRANGER_POOLS = 64;
/**
 * How long a member that left (its goodbye) keeps its pool as a stranger's: the final cancels it is
 * owed go when it leaves (no answer of a non-member is taken: forward-attempts.ts `departed`), so
 * this need only carry them, and a short hold keeps left members from filling the stranger pools
 * that joiners need.
 */
export const LEFT_POOL_MS = 10_000;

export interface StrangerPoolsOptions {
  client: PeerClient;
  /** The address known for `id`, if any. */
  url(id: NodeId): string | undefined;
  /** Whether `id` is a member (its pool is a member's, not counted here). */
  isMember(id: NodeId): boolean;
  /** Whether `id` is being verified (its pool carries the verification). */
  isVerifying(id: NodeId): boolean;
  /** Whether a message to `id` is on its way (closing its pool would abort it: a join, its ack). */
  isSending(id: NodeId): boolean;
  /** The node's clock (default Date.now): certificate failures are said by it, whichever sender meets one. */
  now?: () => number;
}

export class StrangerPools {
  /** Non-members with a pool (seeds, joiners answered, candidates checked), used longest ago first. */
  private readonly strangers = new Set<NodeId>();
  /** Members that left, their pools kept until these timers fire (LEFT_POOL_MS). */
  private readonly leftPools = new Map<NodeId, NodeJS.Timeout>();

  /** Sends to non-members that keep failing (undelivered-mesh.ts). */
  private readonly undelivered = new UndeliveredMesh();

  constructor(private readonly o: StrangerPoolsOptions) {}

  /**
   * A mesh message to `to` failed: logged at debug, and at warn for a joiner unreachable for long or
   * a certificate refused (cert-refusals.ts: no address the joiner gives would fix that).
   */
  sendFailed(logger: RuntimeLogger, to: NodeId, err: Error): void {
    if (err instanceof TransportError && err.certRefused)
      certRefusalsOf(this.o.client, this.o.now).failedAt(logger, to, this.o.url(to), err, "mesh");
    else this.undelivered.failed(logger, to, this.o.url(to), err, this.o.isMember(to));
  }

  /** A mesh message came from `from` (undelivered-mesh.ts: a killed node sends none). */
  heard(from: NodeId): void {
    this.undelivered.heard(from);
  }

  has(id: NodeId): boolean {
    return this.strangers.has(id);
  }

  /** `id` became a member: its pool is no stranger's. */
  admitted(id: NodeId): void {
    this.strangers.delete(id);
  }

  /** A pool to `id` (one is made for a stranger within the bound); false if none can be had. */
  pool(id: NodeId): boolean {
    if (this.o.client.has(id)) {
      this.used(id);
      return true;
    }
    const url = this.o.url(id);
    if (url === undefined) return false;
    if (!this.o.isMember(id)) {
      if (this.strangers.size >= MAX_STRANGER_POOLS && !this.makeRoom()) return false;
      this.strangers.add(id);
    }
    this.o.client.setPeer(id, url);
    return true;
  }

  /**
   * A member that left drains what it took: its pool stays, as a stranger's (within that bound), for
   * the final cancels it is owed, then goes. The node sends it nothing else: it is no member.
   */
  keepLeftPool(id: NodeId): boolean {
    if (!this.o.client.has(id)) return false;
    if (!this.strangers.has(id) && this.strangers.size >= MAX_STRANGER_POOLS && !this.makeRoom())
      return false;
    this.strangers.delete(id);
    this.strangers.add(id);
    clearTimeout(this.leftPools.get(id));
    const timer = setTimeout(() => {
      this.leftPools.delete(id);
      if (!this.o.isMember(id) && !this.o.isVerifying(id)) this.dropStranger(id);
    }, LEFT_POOL_MS);
    timer.unref?.();
    this.leftPools.set(id, timer);
    return true;
  }

  endLeftPool(id: NodeId): void {
    clearTimeout(this.leftPools.get(id));
    this.leftPools.delete(id);
  }

  /** A stranger's pool was used now: last in line to make room. */
  private used(id: NodeId): void {
    if (this.strangers.delete(id)) this.strangers.add(id);
  }

  /**
   * Closes the stranger pool used longest ago that no verification, message on its way or left
   * member's hold needs.
   */
  private makeRoom(): boolean {
    for (const id of this.strangers) {
      if (this.o.isVerifying(id) || this.o.isSending(id) || this.leftPools.has(id)) continue;
      this.dropStranger(id);
      return true;
    }
    return false;
  }

  /** `ifIdle`: kept while a message on its way or a left member's hold needs it (see makeRoom). */
  dropStranger(id: NodeId, ifIdle = false): void {
    if (ifIdle && (this.o.isSending(id) || this.leftPools.has(id))) return;
    if (!this.strangers.delete(id)) return;
    this.o.client.removePeer(id);
  }

  stop(): void {
    for (const t of this.leftPools.values()) clearTimeout(t);
    this.leftPools.clear();
  }
}
