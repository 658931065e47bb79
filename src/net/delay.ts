/**
 * Delay injection for experiments, the paper's way (Section 4): every peer message waits a fixed delay
 * plus a uniform random jitter in [0, jitterMs). Client <-> node traffic is never delayed. With both at
 * 0 the injector is a no-op that schedules no timer, so production paths pay nothing.
 */
import { setTimeout as sleepMs } from "node:timers/promises";
import { z } from "zod";

const MAX_DELAY_MS = 60_000;

/**
 * Sleeps at least `ms` by the monotonic clock. A timer is armed from libuv's loop time, cached when
 * the loop turn began; on a busy machine that is milliseconds stale, so a bare timer can end early by
 * as much, and an injected delay would be shorter than the one asked for.
 */
async function sleepAtLeast(ms: number): Promise<void> {
  const until = performance.now() + ms;
  for (let left = ms; left > 0; left = until - performance.now()) await sleepMs(Math.ceil(left));
}

const optionsSchema = z.object({
  delayMs: z.number().finite().min(0).max(MAX_DELAY_MS),
  jitterMs: z.number().finite().min(0).max(MAX_DELAY_MS),
});

export interface DelayInjectorOptions {
  delayMs: number;
  jitterMs?: number;
  /** Uniform [0, 1) source; injected so experiments are reproducible (default Math.random). */
  random?: () => number;
  /** Timer, injected for tests (default: a timer re-armed until the monotonic clock says `ms` passed). */
  sleep?: (ms: number) => Promise<unknown>;
}

export interface DelayInjector {
  /** False when the injector never delays. */
  readonly enabled: boolean;
  /** The delay the next `wait()` would use is drawn fresh each call; resolves after it. */
  wait(): Promise<void>;
  /** Draws one delay in ms without waiting (for logging and tests). */
  sample(): number;
}

export function createDelayInjector(opts: DelayInjectorOptions): DelayInjector {
  const parsed = optionsSchema.safeParse({ delayMs: opts.delayMs, jitterMs: opts.jitterMs ?? 0 });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new RangeError(
      `invalid delay injection: ${String(issue?.path[0] ?? "value")} must be a number in 0..${MAX_DELAY_MS} ms`,
    );
  }
  const { delayMs, jitterMs } = parsed.data;
  const random = opts.random ?? Math.random;
  const sleep = opts.sleep ?? sleepAtLeast;
  const enabled = delayMs > 0 || jitterMs > 0;
  const resolved = Promise.resolve();
  const sample = () => delayMs + (jitterMs > 0 ? Math.min(Math.max(random(), 0), 1) * jitterMs : 0);
  return {
    enabled,
    sample,
    wait: enabled ? async () => void (await sleep(sample())) : () => resolved,
  };
}
