/**
 * Faults that come with the clients' requests: an unbounded request (a chat request without
 * max_tokens that runs until the context is full, holding an engine slot for minutes), and a client
 * that hangs up before its answer (the node's `client-gone` input). Their shape, the
 * `prefixmesh sim` flag that replays it, its checks and how a run applies it (`ClientFaultModel`)
 * live here. Never drawn by `faultScheduleFor`: the seeded schedules stay what they were.
 */

/** Workload request `request` asks for `maxTokens` output tokens instead of its own. */
export interface SimUnbounded {
  request: number;
  maxTokens: number;
}

/**
 * The client of workload request `request` hangs up `afterMs` after it first submits it, unless
 * answered by then, and never comes back: its origin is told (`client-gone`), the request counts as
 * failed and `abandoned`, and a reply for it afterwards is a violation (answered unasked).
 */
export interface SimAbandon {
  request: number;
  afterMs: number;
}

/** Faults of the clients' requests. */
export interface ClientFaults {
  unbounded?: SimUnbounded[];
  abandon?: SimAbandon[];
}

/** Longest output an unbounded request may ask for (a context of 1M tokens). */
export const MAX_UNBOUNDED_TOKENS = 1_048_576;

export function clientFaultFlags(c: ClientFaults): string[] {
  return [
    ...(c.unbounded ?? []).flatMap((u) => ["--unbounded", `${u.request}:${u.maxTokens}`]),
    ...(c.abandon ?? []).flatMap((a) => ["--abandon", `${a.request}:${a.afterMs}`]),
  ];
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
  const gone = new Set<number>();
  for (const a of f.abandon ?? []) {
    if (!(Number.isInteger(a.request) && a.request >= 0 && a.request < requests))
      bad(`abandoned request ${a.request} is not a request of the workload (0-${requests - 1})`);
    if (gone.has(a.request)) bad(`abandoned request ${a.request} is given twice`);
    gone.add(a.request);
    if (!(Number.isFinite(a.afterMs) && a.afterMs >= 0))
      bad(`abandon afterMs must be a finite number ≥ 0, got ${a.afterMs}`);
  }
}

/** The client faults of one run, as the run applies them. */
export class ClientFaultModel {
  private readonly maxTokensOf: Map<number, number>;
  private readonly abandonAfter: Map<number, number>;

  constructor(faults: ClientFaults) {
    this.maxTokensOf = new Map((faults.unbounded ?? []).map((u) => [u.request, u.maxTokens]));
    this.abandonAfter = new Map((faults.abandon ?? []).map((a) => [a.request, a.afterMs]));
  }

  /** How long after its first submission the client of request `index` hangs up (undefined: never). */
  hangsUpAfter(index: number): number | undefined {
    return this.abandonAfter.get(index);
  }

  /** The output tokens workload request `index` asks for (its own unless made unbounded). */
  maxTokens(index: number, own: number): number {
    return this.maxTokensOf.get(index) ?? own;
  }
}
