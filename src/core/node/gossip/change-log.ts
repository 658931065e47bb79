/**
 * A held owner's change log after one of its states was applied or refused (scuttlebutt.ts): its
 * newest header, the consecutive deltas a relay nets into one (at most `deltaLog`), and whether our
 * estimate is exactly the owner's tree (`clean`) or holds a wrong guess (`wantFull`). Counts the
 * states received by verdict.
 */
import type { Estimates } from "../../estimates.js";
import type { PeerIndex } from "../../peer-index.js";
import type { Snapshot } from "../../snapshot.js";
import type { ScuttlebuttConfig, ScuttlebuttCounters, ScuttlebuttDeps } from "./config.js";
import type { HolderPush } from "./holder-push.js";
import type { OwnerLog } from "./states.js";

/** A member's id (node/types.ts's NodeId). */
type NodeId = string;

export class ChangeLog {
  constructor(
    private readonly estimates: Estimates,
    private readonly index: PeerIndex,
    private readonly deps: ScuttlebuttDeps,
    private readonly config: ScuttlebuttConfig,
    private readonly counters: ScuttlebuttCounters,
  ) {}

  /**
   * The log after `s` was applied (or refused): header, delta chain, whether our estimate is exact.
   * `round`: ours now; `push`: with push to holders, told of an estimate off its owner's pushes.
   */
  settle(
    owner: NodeId,
    log: OwnerLog,
    s: Snapshot,
    blocks: number,
    verdict: string,
    round: number,
    push: HolderPush | undefined,
  ): void {
    const rx = this.counters.statesReceived;
    if (verdict === "applied") {
      rx.applied++;
      this.deps.onApplied?.(s.header);
      const held = this.estimates.held(owner) as { epoch: number; version: number };
      const sameEpoch = log.header.epoch === held.epoch;
      log.header = s.header;
      log.round = round;
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
      if (log.wantFull && push !== undefined) push.mismatch(owner);
    }
    // A first state that did not fit holds nothing usable yet: keep the slot (version 0 of its epoch).
  }
}
