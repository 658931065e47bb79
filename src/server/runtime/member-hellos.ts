/**
 * The hellos of the members SWIM remembers, for mesh-peers.ts: each member's last verified hello,
 * kept while SWIM holds the member (alive, suspect, dead or a left tombstone). SWIM verifies a dead
 * or left member again before taking it back (swim.ts), so its new hello comes with it; should one
 * come back without a verification in hand, the transport notes again what its last hello said — its
 * models (unknown would mean "serves any"), prompt text, channel MAC and cache cap — and asks afresh.
 * A fresh hello is asked for too when a live member's incarnation rises by more than one with no
 * status change (a restart SWIM never saw: the member back within its suspicion time, or its death
 * not heard of yet), since a restarted member may serve other models now; not for a rise of one (a
 * refuted suspicion: a process outbids its other lives by two, swim/self-news.ts, so none of all the
 * members fetches a hello per false suspicion), nor when SWIM checks that new life (mesh-peers.ts),
 * whose verification reads the hello itself.
 *
 * Invariants:
 *  - [Bounded] hellos and incarnations ≤ SWIM's member table after each sync: pruned to its members
 *    once they outnumber it (`keepOnly`); refreshes in flight ≤ one per member (one back again meanwhile is
 *    asked again once it settles).
 *  - [Newest] an answer is noted only if nothing newer came since it was asked: the member did not come
 *    back again meanwhile (the answer may be its previous life's), nor was a newer hello of it read (a
 *    verification's, a DNS re-check's: `remember`).
 *  - [Checked] a refreshed hello is noted only when proven (`verifiedHello`), passing the check a
 *    verification's passes (mesh-verify.ts `checkMemberHello`), while its id still is a member; a
 *    failure is only warned of (the remembered hello stays noted). After stop(), nothing is noted.
 */
import type { NodeId } from "../../core/node/types.js";
import type { PeerHello } from "../../net/wire-schemas.js";
import type { Admin } from "./admin.js";
import { checkMemberHello, type MemberVerificationOptions } from "./mesh-verify.js";

export interface MemberHellosOptions
  extends Pick<MemberVerificationOptions, "node" | "client" | "logger" | "clusterId" | "helloModel"> {
  admin: Pick<Admin, "notePeerHello">;
}

export interface MemberHellosHooks {
  isMember(id: NodeId): boolean;
  /** `id`'s hello, proven its, before it is checked (the newer-protocol senders: mesh-refused.ts). */
  noteHello(id: NodeId, raw: unknown): void;
}

/** A fresh hello asked for: `stale` once its answer may be older than what is known (see [Newest]). */
interface Refresh {
  stale: boolean;
  /** Back again while it was asked: asked again once this one settles. */
  again: boolean;
}

export class MemberHellos {
  private readonly hellos = new Map<NodeId, PeerHello>();
  /** The incarnation each member was last seen live at (SWIM's: it only rises, but for a forged claim). */
  private readonly incarnations = new Map<NodeId, number>();
  private readonly refreshing = new Map<NodeId, Refresh>();
  private stopped = false;

  constructor(
    private readonly o: MemberHellosOptions,
    private readonly hooks: MemberHellosHooks,
  ) {}

  get(id: NodeId): PeerHello | undefined {
    return this.hellos.get(id);
  }

  /** A hello proven and checked just now (a verification's, a DNS re-check's): newer than any in flight. */
  remember(id: NodeId, hello: PeerHello): void {
    this.hellos.set(id, hello);
    const r = this.refreshing.get(id);
    if (r !== undefined) {
      r.stale = true;
      r.again = false;
    }
  }

  /** Member `id` is live at `incarnation`: whether that is past a refutation of the one last seen live. */
  outbid(id: NodeId, incarnation: number): boolean {
    const was = this.incarnations.get(id);
    // Set when lower too: SWIM took a forged claim down to the member's own word (core
    // swim/own-word.ts); kept at the claim, its restarts below that would ask for no fresh hello.
    this.incarnations.set(id, incarnation);
    return was !== undefined && incarnation > was + 1;
  }

  /**
   * Drops what is kept of the members SWIM no longer remembers, once more is kept than it holds (run
   * after every input, so not a walk each time; a forgotten member's entry left meanwhile is harmless:
   * it comes back only through a verification, whose hello replaces it).
   */
  keepOnly(remembered: ReadonlySet<NodeId>): void {
    if (this.hellos.size <= remembered.size && this.incarnations.size <= remembered.size) return;
    for (const id of this.hellos.keys()) if (!remembered.has(id)) this.hellos.delete(id);
    for (const id of this.incarnations.keys()) if (!remembered.has(id)) this.incarnations.delete(id);
  }

  /** Asks member `id` for a fresh hello and notes it if it passes (see [Checked]). */
  refresh(id: NodeId): void {
    if (this.stopped) return;
    const cur = this.refreshing.get(id);
    if (cur !== undefined) {
      cur.stale = true;
      cur.again = true;
      return;
    }
    const r: Refresh = { stale: false, again: false };
    this.refreshing.set(id, r);
    this.o.client
      .verifiedHello(id)
      .then(
        (raw) => {
          if (this.stopped || r.stale || !this.hooks.isMember(id)) return;
          this.hooks.noteHello(id, raw);
          const c = checkMemberHello(this.o, id, raw);
          if (!c.ok) {
            this.o.logger.warn(
              { peer: id, reason: c.reason },
              `member back in the mesh: its fresh hello is refused, its last one kept: ${c.message}`,
            );
            return;
          }
          this.hellos.set(id, c.hello);
          this.o.admin.notePeerHello(id, c.hello);
        },
        (err: Error) => {
          if (this.stopped || r.stale) return;
          this.o.logger.warn(
            { peer: id, err: err.message },
            "member back in the mesh: no fresh hello, its last one kept",
          );
        },
      )
      // Noting it must not turn into an unhandled rejection (a crash): said, and the old hello kept.
      .catch((err: Error) =>
        this.o.logger.warn(
          { peer: id, err: err.message },
          "member back in the mesh: its fresh hello not noted",
        ),
      )
      .finally(() => {
        this.refreshing.delete(id);
        if (r.again && this.hooks.isMember(id)) this.refresh(id);
      });
  }

  stop(): void {
    this.stopped = true;
  }
}
