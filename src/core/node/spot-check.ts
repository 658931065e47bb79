/**
 * Spot checks (config `spotCheckRate`; beyond the paper's crash-only model, advisory): a fraction
 * of the answers peers send for deterministic requests (temperature 0) is recomputed here when our
 * queue is empty, and a peer whose answer disagrees is quarantined (trust.ts) and reported.
 *
 * The rule: two answers agree when their first `COMPARE_CHARS` characters are equal (all of them
 * when shorter). Greedy decoding is deterministic on one machine, but kernels and batching differ
 * across machines, and a near-tie between two tokens can flip late in a long answer; the first
 * tokens rarely do, so only they are compared. Requests with a presence or frequency penalty are not
 * checked: engines count a penalty over different tokens (llama.cpp's last 64 of prompt and output,
 * vLLM's output only) and an older peer drops it, so an honest peer could disagree. A check runs
 * without keeping its prompt in our cache (executor.ts), so checking a peer's prefix does not pull
 * later requests here.
 *
 * Part of the origin role (origin.ts offers answers and judges); node.ts runs a check when idle.
 */
import type { EngineRequest } from "../engine.js";
import type { JobSpec } from "./executor.js";
import type { NodeId } from "./types.js";

/** Characters of the answers compared. */
export const COMPARE_CHARS = 64;
/** Checks waiting for an idle moment (the oldest are dropped beyond). */
const MAX_PENDING = 16;

export interface SpotCheck {
  peer: NodeId;
  request: EngineRequest;
  /** What the peer answered. */
  text: string;
}

/** Whether two answers to one deterministic request agree (the rule above). */
export function answersAgree(a: string, b: string): boolean {
  return a.slice(0, COMPARE_CHARS) === b.slice(0, COMPARE_CHARS);
}

/** The executor job that recomputes `c` here (spot checks are keyed by the request's id). */
export function checkJob(c: SpotCheck): JobSpec {
  return { kind: "check", reqId: c.request.id, from: c.peer, attempt: 0, request: c.request };
}

/** Whether a penalty makes the request's greedy answer depend on the engine (see above). */
function penalized(r: EngineRequest): boolean {
  return (r.presencePenalty ?? 0) !== 0 || (r.frequencyPenalty ?? 0) !== 0;
}

export class SpotChecks {
  private readonly pending: SpotCheck[] = [];
  /** Checks running on our engine, by request id. */
  private readonly running = new Map<string, SpotCheck>();
  counters = { spotChecks: 0, spotCheckMismatches: 0 };

  constructor(private readonly rate: number) {}

  /** A peer's answer: kept for a check with probability `rate` when the request is deterministic. */
  offer(peer: NodeId, request: EngineRequest, text: string, random: () => number): void {
    if (this.rate <= 0 || request.temperature !== 0 || penalized(request) || random() >= this.rate) return;
    this.pending.push({ peer, request, text });
    if (this.pending.length > MAX_PENDING) this.pending.shift();
  }

  /** The next check to run, if any (it runs until `judge` or `drop`). */
  take(): SpotCheck | undefined {
    const c = this.pending.shift();
    if (c) this.running.set(c.request.id, c);
    return c;
  }

  /** Our engine could not run the check of `reqId`: no verdict. */
  drop(reqId: string): void {
    this.running.delete(reqId);
  }

  /** Our own answer to the check of `reqId`: the peer it caught answering otherwise, if any. */
  judge(reqId: string, ours: string): NodeId | undefined {
    const check = this.running.get(reqId);
    if (check === undefined) return undefined;
    this.running.delete(reqId);
    this.counters.spotChecks++;
    const agree = answersAgree(check.text, ours);
    if (!agree) this.counters.spotCheckMismatches++;
    return agree ? undefined : check.peer;
  }

  reset(): void {
    this.pending.length = 0;
    this.running.clear();
  }
}
