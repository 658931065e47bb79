/**
 * Bench-only probe, preloaded into a node under measurement (`node --import loop-turn-probe.js`, see
 * snapshot-stall.ts): the main thread's own CPU time between two 1 ms timer ticks — at least one
 * event-loop turn, so an upper bound on what one turn held the loop — from Linux's per-thread
 * schedstat. It counts time on a CPU, not wall time: on a busy machine the wait for a CPU is the
 * machine's, not the node's work. Every tick interval above 5 ms of CPU is appended to the file
 * named by LOOP_TURN_PROBE_OUT as "<cpu ms> <wait ms> <from> <to>" (performance.now() ms), and every
 * garbage-collection pause above 1 ms as "gc <from> <to>": a pause's main-thread share grows when
 * V8's GC helper threads get no CPU, so loop-turns.ts takes the pauses off the turns they fall in.
 * Where schedstat is absent it writes nothing.
 */
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { PerformanceObserver, performance } from "node:perf_hooks";
import { isMainThread } from "node:worker_threads";

const out = process.env.LOOP_TURN_PROBE_OUT;
const stat = `/proc/${process.pid}/task/${process.pid}/schedstat`;

if (isMainThread && out !== undefined && existsSync(stat)) {
  // "<ns on a CPU> <ns waiting for one> <timeslices>"
  const read = () => readFileSync(stat, "utf8").split(" ").map(Number) as [number, number];
  let last = read();
  let lastAt = performance.now();
  const tick = () => {
    const now = read();
    const at = performance.now();
    const runMs = (now[0] - last[0]) / 1e6;
    if (runMs > 5) {
      const waitMs = (now[1] - last[1]) / 1e6;
      appendFileSync(out, `${runMs.toFixed(2)} ${waitMs.toFixed(2)} ${lastAt.toFixed(2)} ${at.toFixed(2)}\n`);
    }
    last = now;
    lastAt = at;
    setTimeout(tick, 1).unref();
  };
  tick();
  // Entries arrive after the pause, with its place on the same clock.
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (e.duration > 1)
        appendFileSync(out, `gc ${e.startTime.toFixed(2)} ${(e.startTime + e.duration).toFixed(2)}\n`);
    }
  }).observe({ entryTypes: ["gc"] });
}
