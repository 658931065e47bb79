/**
 * The JS heap in use plus ArrayBuffer memory, after a full garbage collection when one can be forced (the `gc` function is
 * reached through V8's --expose-gc flag at run time; without it the figure includes garbage and
 * only bounds the live heap from above).
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
 * Bytes of live heap now (collected first when possible), ArrayBuffers included: a tree's token runs
 * longer than V8's on-heap limit for typed arrays live outside `heapUsed`.
 */
export function liveHeapBytes(): number {
  gc?.();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}
