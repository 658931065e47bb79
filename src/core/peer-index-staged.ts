/**
 * The PeerIndex's replacement of one owner's estimate in bounded steps (one replacement at a time), so
 * a snapshot at the key cap never holds the caller for long, and the key set the last one replaced,
 * kept for the next.
 */
import { invariant } from "./invariant.js";
import { KeyTable, keyHi, keyLo } from "./key-table.js";
import type { MergedTable, Owner } from "./peer-index-table.js";
import type { SnapshotBody } from "./snapshot.js";

/**
 * A replacement of one owner's estimate done in bounded steps (`step`). Phases: wipe the table the
 * owner's next key set goes in (a recycled one, or a fresh one whose pages are touched in order rather
 * than faulted in by random inserts), build that set from the body, clear the old keys it lacks, set
 * the new keys the old lacked. While it runs the owner is hidden from matches (it matches nothing): its
 * bits are a mix of two versions and must not be routed on.
 */
export interface Staged {
  owner: Owner;
  body: SnapshotBody;
  /** Taken by the first step (a table for millions of keys is a step's work of its own). */
  next: KeyTable | undefined;
  /** Keys of `body` to take (its length, capped). */
  n: number;
  phase: "wipe" | "build" | "clear" | "grow" | "set";
  /** Position in the phase: a body index while building, else a slot of the table walked. */
  at: number;
}

/** Slots wiped per unit of step budget: a sequential fill costs far less per slot than an insert. */
const WIPE_SLOTS_PER_KEY = 8;
/** A replaced key set at least this large (slots) is kept for the next staged replacement. */
const SPARE_MIN_SLOTS = 1 << 16;

export class StagedReplace {
  /** The replacement in progress, if any. */
  current: Staged | undefined;
  /**
   * The key set a staged replacement last replaced, reused by the next one of a like size: at the key
   * cap that is 32 MB a snapshot need not allocate (and the collector need not reclaim). One at most.
   */
  private spare: KeyTable | undefined;

  constructor(private readonly merged: MergedTable) {}

  /** Stages replacing `owner`'s estimate by the first `n` keys of `body`. */
  begin(owner: Owner, body: SnapshotBody, n: number): void {
    this.current = { owner, body, next: undefined, n, phase: "wipe", at: 0 };
  }

  /** Abandons the replacement of `o`, if staged, clearing the bits its half-applied next set holds. */
  drop(o: Owner): void {
    const s = this.current;
    if (s?.owner !== o) return;
    // The grow belongs to the replacement being dropped: finish it, so no emptied key stays behind.
    this.merged.growStep(Number.MAX_SAFE_INTEGER);
    // Bits of the half-applied next set may be set too: clear both sets.
    if (s.phase === "clear" || s.phase === "set") {
      s.next?.forEach((lo, hi) => {
        this.merged.clearBit(lo, hi, o.bit);
      });
    }
    this.current = undefined;
  }

  /**
   * Does at most about `budget` keys' (or slots') work of the staged replacement; true once it is
   * complete (the owner matches again, at its new estimate). When the merged table needs room for the
   * new keys it grows in steps of its own (`grow`) before the set phase.
   */
  step(budget: number): boolean {
    const s = this.current;
    if (s === undefined) return true;
    const o = s.owner;
    const keys = s.body.keys;
    let left = Math.max(1, budget);
    if (s.next === undefined) {
      s.next = this.takeTable(2 * s.n);
      return false;
    }
    const next = s.next;
    if (s.phase === "wipe") {
      const end = Math.min(next.capacity, s.at + left * WIPE_SLOTS_PER_KEY);
      next.wipe(s.at, end);
      s.at = end;
      if (end < next.capacity) return false;
      invariant(next.size === 0, () => `PeerIndex: a wiped key set holds ${next.size} keys`);
      s.phase = "build";
      s.at = 0;
      return false;
    }
    if (s.phase === "build") {
      const end = Math.min(s.n, s.at + left);
      for (let i = s.at; i < end; i++) next.insert(keyLo(keys[i]!), keyHi(keys[i]!));
      left -= end - s.at;
      s.at = end;
      if (end < s.n) return false;
      s.phase = "clear";
      s.at = 0;
    }
    if (s.phase === "clear") {
      const capacity = o.keys.capacity;
      const end = Math.min(capacity, s.at + left);
      o.keys.forEachIn(s.at, end, (lo, hi) => {
        if (next.find(lo, hi) < 0) this.merged.clearBit(lo, hi, o.bit);
      });
      left -= end - s.at;
      s.at = end;
      if (end < capacity) return false;
      s.at = 0;
      s.phase = "set";
      if (this.merged.beginGrow(next.size)) s.phase = "grow";
      return false;
    }
    if (s.phase === "grow") {
      if (!this.merged.growStep(left * 2)) return false;
      s.phase = "set";
      return false;
    }
    const capacity = next.capacity;
    const end = Math.min(capacity, s.at + left);
    next.forEachIn(s.at, end, (lo, hi) => {
      if (o.keys.find(lo, hi) < 0) this.merged.setBit(lo, hi, o.bit);
    });
    s.at = end;
    if (end < capacity) return false;
    if (o.keys.capacity >= SPARE_MIN_SLOTS) this.spare = o.keys;
    o.keys = next;
    this.current = undefined;
    return true;
  }

  /** A key set with room for `slots`: the spare if it is of that size (up to twice), else a new one. */
  private takeTable(slots: number): KeyTable {
    const spare = this.spare;
    this.spare = undefined;
    if (spare !== undefined && spare.capacity >= slots && spare.capacity <= 2 * Math.max(16, slots)) {
      return spare;
    }
    return new KeyTable(0, slots);
  }
}
