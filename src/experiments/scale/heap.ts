/**
 * The JS heap in use, after a full garbage collection when one can be forced (the `gc` function is
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

/** Bytes of live heap now (collected first when possible). */
export function liveHeapBytes(): number {
  gc?.();
  return process.memoryUsage().heapUsed;
}
