/**
 * Faults that come with the clients' requests: an unbounded request (a chat request without
 * max_tokens that runs until the context is full, holding an engine slot for minutes). Its shape, the
 * `prefixmesh sim` flag that replays it, its checks and how a run applies it (`ClientFaultModel`)
 * live here. Never drawn by `faultScheduleFor`: the seeded schedules stay what they were.
 */

/** Workload request `request` asks for `maxTokens` output tokens instead of its own. */
export interface SimUnbounded {
  request: number;
  maxTokens: number;
}

/** Faults of the clients' requests. */
export interface ClientFaults {
  unbounded?: SimUnbounded[];
}

/** Longest output an unbounded request may ask for (a context of 1M tokens). */
export const MAX_UNBOUNDED_TOKENS = 1_048_576;

export function clientFaultFlags(c: ClientFaults): string[] {
  return (c.unbounded ?? []).flatMap((u) => ["--unbounded", `${u.request}:${u.maxTokens}`]);
}

export function checkClientFaults(f: ClientFaults, requests: number, bad: (m: string) => never): void {
  const seen = new Set<number>();
  for (const u of f.unbounded ?? []) {
    if (!(Number.isInteger(u.request) && u.request >= 0 && u.request < requests))
      bad(`unbounded request ${u.request} is not a request of the workload (0-${requests - 1})`);
    if (seen.has(u.request)) bad(`unbounded request ${u.request} is given twice`);
    seen.add(u.request);
    if (!(Number.isInteger(u.maxTokens) && u.maxTokens >= 1 && u.maxTokens <= MAX_UNBOUNDED_TOKENS))
      bad(`unbounded maxTokens must be an integer in [1, ${MAX_UNBOUNDED_TOKENS}], got ${u.maxTokens}`);
  }
}

/** The client faults of one run, as the run applies them. */
export class ClientFaultModel {
  private readonly maxTokensOf: Map<number, number>;

  constructor(faults: ClientFaults) {
    this.maxTokensOf = new Map((faults.unbounded ?? []).map((u) => [u.request, u.maxTokens]));
  }

  /** The output tokens workload request `index` asks for (its own unless made unbounded). */
  maxTokens(index: number, own: number): number {
    return this.maxTokensOf.get(index) ?? own;
  }
}
