/**
 * Reads what loop-turn-probe.ts wrote: the node's long loop turns (main-thread CPU between two 1 ms
 * ticks) and its garbage-collection pauses, told apart. A turn that a GC pause overlaps holds V8's work
 * besides the node's: on a machine whose cores are all busy, V8's parallel GC helpers get no CPU and the
 * main thread does the whole collection, so such a turn says more about the machine than about the code.
 * Only the pauses are taken off a turn, not the turn: a turn that allocates holds a scavenge now and
 * then, and a long turn of the node's own must still show with one in it.
 */
import { readFileSync } from "node:fs";

export interface LoopTurns {
  /** The most CPU of any turn (ms; 0 when none was above the probe's 5 ms floor). */
  cpuMax: number;
  /**
   * The most CPU of a turn less the GC pauses within it: the node's own work alone (ms). A pause is
   * taken off at its wall time, at least its CPU, so this is a lower bound.
   */
  cpuMaxWithoutGc: number;
  /** The longest GC pause (wall ms; above the probe's 1 ms floor, else 0). */
  gcPauseMax: number;
}

interface Span {
  from: number;
  to: number;
}

/** The turns and pauses the probe wrote to `file` after byte `from`. */
export function readLoopTurns(file: string, from: number): LoopTurns {
  const turns: (Span & { cpu: number })[] = [];
  const pauses: Span[] = [];
  for (const line of readFileSync(file, "utf8").slice(from).split("\n")) {
    const f = line.split(" ");
    if (f[0] === "gc") pauses.push({ from: Number(f[1]), to: Number(f[2]) });
    else if (f.length >= 4) turns.push({ cpu: Number(f[0]), from: Number(f[2]), to: Number(f[3]) });
  }
  const r: LoopTurns = { cpuMax: 0, cpuMaxWithoutGc: 0, gcPauseMax: 0 };
  for (const p of pauses) r.gcPauseMax = Math.max(r.gcPauseMax, p.to - p.from);
  const merged = merge(pauses);
  for (const t of turns) {
    r.cpuMax = Math.max(r.cpuMax, t.cpu);
    let paused = 0;
    for (const p of merged) paused += Math.max(0, Math.min(p.to, t.to) - Math.max(p.from, t.from));
    r.cpuMaxWithoutGc = Math.max(r.cpuMaxWithoutGc, t.cpu - paused);
  }
  return r;
}

/** The pauses as disjoint spans, in order: one within another is not taken off twice. */
function merge(pauses: readonly Span[]): Span[] {
  const out: Span[] = [];
  for (const p of [...pauses].sort((a, b) => a.from - b.from)) {
    const last = out[out.length - 1];
    if (last !== undefined && p.from <= last.to) last.to = Math.max(last.to, p.to);
    else out.push({ ...p });
  }
  return out;
}
