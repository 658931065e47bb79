/**
 * What a Scuttlebutt peer lacks, for its answer (scuttlebutt.ts): our own state and each owner we hold
 * newer than its digest lists (states.ts picks the delta chain or whole set), and, up to its room,
 * owners it does not hold at random. Counts the states sent; the logs are the caller's.
 */
import type { Estimates } from "../../estimates.js";
import type { PeerIndex } from "../../peer-index.js";
import type { DigestEntry, ScuttlebuttConfig, ScuttlebuttCounters, ScuttlebuttDeps } from "./config.js";
import { type OwnerLog, type OwnerState, type OwnState, ownState, pickRandom, relayState } from "./states.js";

/** A member's id (node/types.ts's NodeId). */
type NodeId = string;

export class Relay {
  /** An owner's whole key set, from our estimate (for relayState; one function, not one per call). */
  private readonly bodyOf = (owner: NodeId) => ({
    blockSize: this.index.blockSize,
    keys: this.index.estimateKeys(owner),
  });

  constructor(
    private readonly selfId: NodeId,
    private readonly index: PeerIndex,
    private readonly estimates: Estimates,
    private readonly logs: ReadonlyMap<NodeId, OwnerLog>,
    private readonly deps: ScuttlebuttDeps,
    private readonly config: ScuttlebuttConfig,
    private readonly counters: ScuttlebuttCounters,
  ) {}

  /**
   * What a peer that holds `theirs` lacks: for each owner we hold newer (ourselves included), the
   * delta chain from its version, else the whole key set. `room`: also owners it does not hold at
   * all (only when it has room: a full receiver asks for its discoveries itself). `onlyListed`: just those in
   * `theirs`. `round`: with push to holders, our round now (relayStates).
   */
  statesFor(
    theirs: Map<NodeId, DigestEntry | undefined>,
    room: number,
    self: OwnState,
    round: number | undefined,
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
      this.relayStates(owner, log, theirs.get(owner), out, round);
    }
    // Owners it lacks, as many as it has room for, at random (not the same first few to everyone).
    for (const owner of pickRandom(unheld, Math.min(room, max - out.length), this.deps.random))
      this.relayStates(owner, this.logs.get(owner) as OwnerLog, undefined, out, round);
    return out.slice(0, max);
  }

  /**
   * Owner's states from what the peer holds (`e`; undefined = nothing) to ours, into `out`. With push
   * to holders (`round` given), a change we took this round is not relayed to a peer that holds the
   * owner: the owner pushes it to its holders this round too, so relaying it made the same delta
   * arrive twice. A holder still behind a round later (a lost push, a holder the owner does not know
   * yet) gets it.
   */
  private relayStates(
    owner: NodeId,
    log: OwnerLog,
    e: DigestEntry | undefined,
    out: OwnerState[],
    round: number | undefined,
  ): void {
    if (round !== undefined && e !== undefined && e.version > 0 && log.round === round) return;
    const s = relayState(log, this.estimates.heldNow(owner), e, this.bodyOf, owner);
    if (s !== undefined) this.send(s, out);
  }

  private send(s: OwnerState, out: OwnerState[]): void {
    out.push(s);
    this.counters.statesSent[s.snapshot.kind === "full" ? "full" : "delta"]++;
  }
}
