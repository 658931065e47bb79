/**
 * The shape every workload takes, whatever its source (MMLU, synthetic, trace replay): the simulator,
 * the experiments and `prefixmesh bench` all consume this.
 */
import type { Tokens } from "../core/engine.js";

export interface WorkloadRequest {
  /** Stable id within the workload. */
  id: string;
  /** Prompt tokens: the routing key (gpt-tokenizer ids for simulated workloads). */
  tokens: Tokens;
  /** Prompt text, when known (needed to replay through a real node's HTTP API). */
  prompt?: string;
  /** Grouping for reports: the MMLU subject, or a synthetic topic. */
  group: string;
  /** Output tokens to generate (1 for MMLU, as the paper). */
  maxTokens: number;
  /** Sampling temperature, when the workload fixes one (0: deterministic, what spot checks recompute). */
  temperature?: number;
  /** Entry node index, when the schedule fixes it (trace replay); else the runner assigns round-robin. */
  entry?: number;
  /** Arrival time in ms from the start (open loop / trace replay); absent in closed loop. */
  arrivalMs?: number;
  /**
   * A follow-up turn (chat): sent only once request `request` (an earlier index) has been answered,
   * `thinkMs` later in open loop. Its tokens start with that request's tokens. Such a request has no
   * `arrivalMs`: when it arrives depends on when its predecessor finishes.
   */
  after?: { request: number; thinkMs: number };
}

export interface Workload {
  name: string;
  /** True when generated rather than read from real data: reports must say so. */
  synthetic: boolean;
  requests: WorkloadRequest[];
  /** closed-loop: one request at a time, the next after the previous completes (the paper). */
  arrival: "closed-loop" | "open-loop";
  /** How it was made, for reports (source, schedule, seed, tokenizer, mean prompt length). */
  meta?: WorkloadMeta;
}

/** Provenance of a workload (optional; added by the workload helper). */
export interface WorkloadMeta {
  source: "mmlu" | "synthetic" | "trace";
  /** e.g. "uniform" or "hot-set 80/20 with repeats". */
  schedule: string;
  seed?: number;
  /** gpt-tokenizer encoding, when tokens came from text. */
  encoding?: string;
  meanPromptTokens: number;
  /** Distinct prompts in the pool the schedule drew from. */
  poolSize: number;
  /** Groups chosen hot (hot-set skew) or in Zipf rank order. */
  hotGroups?: string[];
  /** Requests whose exact prompt occurred earlier in the schedule. */
  repeatedRequests: number;
  /** Chat workloads: conversations and turns per conversation. */
  chat?: { conversations: number; turns: string; meanTurns: number; start: string };
}
