/**
 * Bench-only probe, preloaded into a node under measurement (`node --import loop-turn-probe.js`, see
 * snapshot-stall.ts): the main thread's own CPU time between two 1 ms timer ticks — at least one
 * event-loop turn, so an upper bound on what one turn held the loop — from Linux's per-thread
 * schedstat. It counts time on a CPU, not wall time: on a busy machine the wait for a CPU is the
 * machine's, not the node's work. Every tick interval above 5 ms of CPU is appended to the file
 * named by LOOP_TURN_PROBE_OUT as "<cpu ms> <wait ms>". Where schedstat is absent it writes nothing.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { isMainThread } from "node:worker_threads";

const out = process.env.LOOP_TURN_PROBE_OUT;
const stat = `/proc/${process.pid}/task/${process.pid}/schedstat`;

if (isMainThread && out !== undefined && existsSync(stat)) {
  // "<ns on a CPU> <ns waiting for one> <timeslices>"
  const read = () => readFileSync(stat, "utf8").split(" ").map(Number) as [number, number];
  let last = read();
  const tick = () => {
    const now = read();
    const runMs = (now[0] - last[0]) / 1e6;
    if (runMs > 5) appendFileSync(out, `${runMs.toFixed(2)} ${((now[1] - last[1]) / 1e6).toFixed(2)}\n`);
    last = now;
    setTimeout(tick, 1).unref();
  };
  tick();
}
