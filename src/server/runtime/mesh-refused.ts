/**
 * The mesh messages mesh-peers.ts refused from authenticated senders, counted as `invalid` or, for a
 * newer build's, `unsupported`; the senders whose hello named a newer protocol, which tell the two
 * apart; and the hellos read again at an unknown kind, so that a restarted sender is counted on its
 * current build.
 *
 * Invariants (mesh-peers.ts has them in full): [Newer is not invalid] a refused message counts as
 * `unsupported` only when its sender's last checked hello named a newer protocol and it failed at a
 * kind marker this build does not know; an unknown kind from a sender not known newer, or known so
 * from a hello read PROTOCOL_RECHECK_MS ago or more, has its hello read again first. [Bounded]
 * senders known to speak a newer protocol ≤ MAX_NEWER_SENDERS (and as many re-read times), hellos
 * read again for an unknown kind ≤ MAX_PROTOCOL_READS at once.
 */
import type { NodeId } from "../../core/node/types.js";
import { BUILD_RANGE } from "../../net/protocol-range.js";
import type { PeerClient } from "../../net/transport-client.js";
import { helloSchema } from "../../net/wire-schemas.js";
import type { RuntimeLogger } from "./logger.js";

/** Senders remembered as speaking a newer protocol than this build (see `unsupportedMessages`). */
export const MAX_NEWER_SENDERS = 1024;
/** Hellos read again at once for an unknown kind (see [Newer is not invalid]); past it, counted as read. */
export const MAX_PROTOCOL_READS = 64;
/** How long after such a re-read a sender's unknown kinds are counted on it, with no new read. */
export const PROTOCOL_RECHECK_MS = 30_000;

/** What the counts need of mesh-peers.ts' options (MeshPeersOptions has them all). */
export interface RefusedMeshMessagesOptions {
  logger: RuntimeLogger;
  /** Whether a pool to the sender is held, and its hello read again (proven its). */
  client: Pick<PeerClient, "has" | "verifiedHello">;
  /** The clock of the protocol re-reads; default Date.now. */
  now?: () => number;
}

export class RefusedMeshMessages {
  /** Senders whose last checked hello named a protocol newer than ours: the newest it named, and when. */
  private readonly newer = new Map<NodeId, { protocol: number; at: number }>();
  /** Senders whose hello is being read again for an unknown kind: the refusals waiting on it. */
  private readonly protocolReads = new Map<NodeId, number>();
  /** When each sender's hello was last read again for one (PROTOCOL_RECHECK_MS apart). */
  private readonly protocolReadAt = new Map<NodeId, number>();
  /** Moves with each epoch: a re-read's refusals are counted only in the epoch they came in. */
  private epoch = 0;
  private refused = 0;
  private unsupported = 0;

  constructor(private readonly o: RefusedMeshMessagesOptions) {}

  /** Refused as `invalid` (see MeshPeers' `refusedMessages`). */
  get invalid(): number {
    return this.refused;
  }

  /** Refused as a newer build's (see MeshPeers' `unsupportedMessages`). */
  get newerBuilds(): number {
    return this.unsupported;
  }

  /** A new epoch: the counts start over (see MeshPeers' `newEpoch`). */
  newEpoch(): void {
    this.refused = 0;
    this.unsupported = 0;
    this.epoch++;
  }

  /** A message from `from` that did not decode (`error`), counted and logged; returns why it was refused. */
  refuse(from: NodeId, error: string, unknownKind: boolean): string {
    const known = unknownKind ? this.newer.get(from) : undefined;
    // Not known newer, or known from a hello read a while ago (it may have restarted on another
    // build since, which SWIM takes back unchecked): read it again first.
    const stale = known === undefined || this.now() - known.at >= PROTOCOL_RECHECK_MS;
    if (unknownKind && stale && this.rereadProtocol(from)) {
      this.o.logger.debug({ peer: from, err: error }, "mesh message of an unknown kind refused");
      return error;
    }
    const newer = known?.protocol;
    if (newer !== undefined) {
      // A newer build's message (see [Newer is not invalid]): a rolling upgrade, not a fault.
      this.unsupported++;
      const why = `${error} (its sender speaks protocol ${newer}, this node ${BUILD_RANGE.max})`;
      this.o.logger.debug({ peer: from, err: why }, "mesh message of a newer protocol refused");
      return why;
    }
    // Only an authenticated sender reaches here (the peer port's auth runs first), so this is a
    // node sending garbage: worth an operator's alert, unlike a stranger's (auth-rejected).
    this.refused++;
    this.o.logger.debug({ peer: from, err: error }, "mesh message refused");
    return error;
  }

  /**
   * Whether `id`'s hello (proven its: verifiedHello) names a protocol newer than this build's, kept
   * for [Newer is not invalid] whatever the check then decides (a build wholly newer is refused as a
   * member, and may still send us mesh messages). Bounded: the oldest noted goes first.
   */
  noteProtocol(id: NodeId, raw: unknown): void {
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
}
