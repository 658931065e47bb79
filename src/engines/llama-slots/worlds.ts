/**
 * The slot mirrors the server may be in, when the node cannot tell the order of two of its events.
 *
 * A run's end and another run's start reach the node on two connections, each written by its own
 * server thread: on a busy machine the start's response can come first though the other run had
 * already ended at the server (or the other way round). The order matters: every idle slot is saved
 * to the RAM cache when a run starts (`--cache-idle-slots`), so a slot that ended just before that
 * start is saved then, and one still running is saved at a later start or not at all. The server never
 * says which (its responses carry no clock), so the mirror keeps both worlds, each with the prediction
 * it made for every run still going, and drops a world when a run's reported `cache_n` contradicts it.
 *
 * The first world is the likeliest (fewest events taken out of the order the node saw them): it
 * predicts and chooses slots. A request reuses cached content only when every world says that content
 * is its own namespace's, so an order the node guessed wrong never hands a tenant another's prefix.
 * Worlds that become identical merge; beyond MAX_WORLDS the least likely go.
 */
import { invariant } from "../../core/invariant.js";
import type { SlotMirror } from "./slot-mirror.js";

export const MAX_WORLDS = 8;

export interface World {
  mirror: SlotMirror;
  /** Events taken out of the order the node saw them: the lower, the likelier. */
  surprise: number;
  /** This world's prediction for the run going on in each slot. */
  predicted: Map<number, number>;
}

export class MirrorWorlds {
  private list: World[];
  /** Worlds dropped by a report, merged, or over the bound (for the status). */
  dropped = 0;
  forks = 0;

  constructor(mirror: SlotMirror) {
    this.list = [{ mirror, surprise: 0, predicted: new Map() }];
  }

  /** The likeliest world's mirror. */
  get primary(): SlotMirror {
    return this.list[0]!.mirror;
  }

  get size(): number {
    return this.list.length;
  }

  /** Every world's mirror, the likeliest first. */
  mirrors(): SlotMirror[] {
    return this.list.map((w) => w.mirror);
  }

  /** Back to one world. */
  reset(mirror: SlotMirror): void {
    this.list = [{ mirror, surprise: 0, predicted: new Map() }];
  }

  /** Applies `fn` to every world's mirror. */
  each(fn: (m: SlotMirror) => void): void {
    for (const w of this.list) fn(w.mirror);
  }

  /** Whether `test` holds in every world. */
  every(test: (m: SlotMirror) => boolean): boolean {
    return this.list.every((w) => test(w.mirror));
  }

  /** Launches a run on `slot` in every world; returns the likeliest world's prediction. */
  launch(slot: number, launch: (m: SlotMirror) => number): number {
    for (const w of this.list) w.predicted.set(slot, launch(w.mirror));
    return this.list[0]!.predicted.get(slot)!;
  }

  /**
   * Each world splits in two: one where `happened` ran on its mirror, one where it did not.
   * `likely`: whether the node's own order says it happened (the other world is the surprise).
   */
  fork(happened: (m: SlotMirror) => void, likely: boolean): void {
    const next: World[] = [];
    for (const w of this.list) {
      const alt: World = { mirror: w.mirror.clone(), surprise: w.surprise, predicted: new Map(w.predicted) };
      happened(alt.mirror);
      if (likely) {
        w.surprise++;
        next.push(alt, w);
      } else {
        alt.surprise++;
        next.push(w, alt);
      }
    }
    this.forks++;
    this.settle(next);
  }

  /**
   * Each world with a state in `saved` (taken before a start, `relaunch`) gains one where `happened`
   * ran on that state before the start, then the events since (`since`): an event the node saw after
   * that start, which the server had before it. The new worlds are the surprise. `reported`: the
   * start's run already ended with that count (worlds that predicted otherwise are not made).
   */
  forkBefore(
    saved: { world: World; state: ReturnType<SlotMirror["save"]> }[],
    happened: (m: SlotMirror) => void,
    relaunch: { slot: number; launch: (m: SlotMirror) => number; reported?: number | undefined },
    since: readonly ((m: SlotMirror) => void)[],
  ): void {
    const next: World[] = [];
    for (const w of this.list) {
      next.push(w);
      const s = saved.find((b) => b.world === w);
      if (!s) continue;
      const mirror = w.mirror.clone();
      mirror.undo({ ...s.state, cache: s.state.cache?.clone() });
      happened(mirror);
      const p = relaunch.launch(mirror);
      for (const fn of since) fn(mirror);
      const predicted = new Map(w.predicted);
      if (predicted.has(relaunch.slot)) predicted.set(relaunch.slot, p);
      else if (relaunch.reported !== undefined && p !== relaunch.reported) continue;
      next.push({ mirror, surprise: w.surprise + 1, predicted });
    }
    this.forks++;
    this.settle(next);
  }

  /**
   * The run on `slot` ended and the server reported `reported` cached tokens: worlds that predicted
   * otherwise go, unless none predicted it (the mirror is then wrong in a way no world foresaw, and
   * a resync follows). Returns whether some world predicted it.
   */
  report(slot: number, reported: number | undefined): boolean {
    const right =
      reported === undefined ? this.list : this.list.filter((w) => w.predicted.get(slot) === reported);
    for (const w of this.list) w.predicted.delete(slot);
    if (right.length === 0) return false;
    this.dropped += this.list.length - right.length;
    this.list = right;
    return true;
  }

  /** The state now, to go back to when a run never reached the server. */
  save(): { world: World; state: ReturnType<SlotMirror["save"]> }[] {
    return this.list.map((w) => ({ world: w, state: w.mirror.save() }));
  }

  /**
   * Back to `saved` for the worlds still held: one a report refuted since stays refuted. Worlds forked
   * since carry the launch and have no saved state, so they go too — unless none of the saved ones is
   * left, when all of `saved` comes back (the only state without the launch).
   */
  undo(saved: { world: World; state: ReturnType<SlotMirror["save"]> }[], slot: number): void {
    const still = saved.filter(({ world }) => this.list.includes(world));
    const back = still.length > 0 ? still : saved;
    this.dropped += this.list.filter((w) => !back.some((b) => b.world === w)).length;
    this.list = back.map(({ world, state }) => {
      world.mirror.undo(state);
      world.predicted.delete(slot);
      return world;
    });
  }

  /** Likeliest first (stable), identical worlds merged, at most MAX_WORLDS. */
  private settle(next: World[]): void {
    next.sort((a, b) => a.surprise - b.surprise);
    const kept: World[] = [];
    for (const w of next) {
      if (kept.length >= MAX_WORLDS || kept.some((k) => k.mirror.sameAs(w.mirror) && samePredictions(k, w)))
        this.dropped++;
      else kept.push(w);
    }
    invariant(kept.length > 0, "at least one world remains");
    this.list = kept;
  }
}

function samePredictions(a: World, b: World): boolean {
  if (a.predicted.size !== b.predicted.size) return false;
  for (const [slot, p] of a.predicted) if (b.predicted.get(slot) !== p) return false;
  return true;
}
