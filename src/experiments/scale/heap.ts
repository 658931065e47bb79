/**
 * The JS heap in use plus ArrayBuffer memory, after full garbage collections when one can be forced
 * (the `gc` function is reached through V8's --expose-gc flag at run time; without it the figure
 * includes garbage and only bounds the live heap from above).
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

let gc: (() => void) | undefined;
try {
  setFlagsFromString("--expose-gc");
  gc = runInNewContext("gc") as () => void;
} catch {
  gc = undefined;
}

export const canCollect = gc !== undefined;

/**
 * A dead simulation is not all reclaimed by one full GC: some of it survives two or three (objects
 * held weakly by compiled code go a cycle later, and ArrayBuffers are swept after the cycle that
 * found them dead). One GC before the run left the previous run's garbage in the baseline, which then
 * exceeded the reading at full load. So collect until the reading has not fallen for this many
 * collections in a row.
 */
const STABLE_GCS = 3;
/** Collections at most per reading (each is a full mark-compact of the whole heap). */
const MAX_GCS = 10;

function reading(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/**
 * Bytes of live heap now (collected first when possible, until stable), ArrayBuffers included: a
 * tree's token runs longer than V8's on-heap limit for typed arrays live outside `heapUsed`.
 */
export function liveHeapBytes(): number {
  if (gc === undefined) return reading();
  let best = Number.POSITIVE_INFINITY;
  let flat = 0;
  for (let i = 0; i < MAX_GCS && flat < STABLE_GCS; i++) {
    gc();
    const b = reading();
    // A fall below half a percent is noise, not garbage going.
    if (b < best * 0.995) flat = 0;
    else flat++;
    best = Math.min(best, b);
  }
  return best;
}
