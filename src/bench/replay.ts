/**
 * Replays a workload through real nodes' HTTP API (the completions endpoint, prompt text), closed loop
 * with C concurrent clients (a chat follow-up waits for the turn it follows), entry nodes round-robin,
 * and summarises what the nodes reported: latency,
 * cached-token share, per-node counts and the hotspot share (the paper's §5 metrics, measured live).
 */
import { Pool } from "undici";
import { type TimingMs as ApiTimingMs, CONTEXT_LENGTH_EXCEEDED } from "../server/openai/format.js";
import type { Workload, WorkloadRequest } from "../workload/types.js";

export interface ReplayOptions {
  urls: string[];
  concurrency: number;
  /** Per-request timeout. */
  timeoutMs?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface RequestSample {
  id: string;
  group: string;
  entry: number;
  ok: boolean;
  status: number;
  latencyMs: number;
  promptTokens: number;
  cachedTokens: number;
  servedBy: string | undefined;
  hops: number;
  /** Where the entry node says the time went (ms), when it reports it. */
  timing?: TimingMs;
  /** Forward attempts that failed before the one that answered. */
  fallbacks?: number;
  error?: string;
  /** Refused because prompt + max_tokens do not fit the model's context (400 context_length_exceeded). */
  tooLong?: boolean;
}

/** The nodes' own breakdown of a request's time (the response's `prefixmesh.timing_ms`), but its total. */
export type TimingMs = Omit<ApiTimingMs, "total">;

export interface ReplaySummary {
  requests: number;
  ok: number;
  /** Requests that got no answer, but for `tooLong`. */
  failed: number;
  /** Requests the nodes refused as not fitting the model's context: the workload's, not a failure. */
  tooLong: number;
  wallSec: number;
  meanMs: number;
  p50Ms: number;
  p99Ms: number;
  /** Σ cached prompt tokens / Σ prompt tokens over successful requests. */
  cachedShare: number;
  /** Share of requests served by the busiest node. */
  hotspotShare: number;
  forwardedShare: number;
  perNode: Record<string, number>;
  errors: Record<string, number>;
  /** Mean of the nodes' breakdown over the successful requests that reported one (undefined: none did). */
  meanTimingMs: TimingMs | undefined;
  /** Forward attempts that failed before an answer, summed over the requests. */
  fallbacks: number;
}

/** Prompt text for a request; token-only workloads get one pseudo-word per token (keeps the sharing). */
export function promptText(r: WorkloadRequest): string {
  if (r.prompt !== undefined) return r.prompt;
  const words: string[] = [];
  for (const t of r.tokens) words.push(`w${t.toString(36)}`);
  return words.join(" ");
}

interface CompletionBody {
  usage?: { prompt_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } };
  prefixmesh?: { served_by?: string; hops?: number; fallbacks?: number; timing_ms?: Partial<TimingMs> };
  error?: { message?: string; code?: string };
}

/** The response's breakdown if it has one with every part a finite number (an older node has none). */
function timingOf(t: Partial<TimingMs> | undefined): TimingMs | undefined {
  if (!t) return undefined;
  const { queue, prefill, decode, network } = t;
  const all = [queue, prefill, decode, network];
  if (!all.every((x) => typeof x === "number" && Number.isFinite(x))) return undefined;
  return { queue, prefill, decode, network } as TimingMs;
}

export async function replay(workload: Workload, model: string, o: ReplayOptions): Promise<RequestSample[]> {
  const pools = o.urls.map(
    (u) => new Pool(new URL(u).origin, { connections: Math.max(1, o.concurrency), keepAliveTimeout: 30_000 }),
  );
  const reqs = workload.requests;
  const samples: RequestSample[] = new Array(reqs.length);
  // A chat follow-up is sent only once the turn it follows is answered (that turn is earlier in the
  // list, so some client already holds it: waiting cannot deadlock).
  const answered = new Map<number, Promise<void>>();
  const waitFor = new Map<number, () => void>();
  reqs.forEach((r) => {
    const p = r.after?.request;
    if (p !== undefined && !answered.has(p)) answered.set(p, new Promise((res) => waitFor.set(p, res)));
  });
  let next = 0;
  let done = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= reqs.length) return;
      const r = reqs[i] as WorkloadRequest;
      if (r.after) await answered.get(r.after.request);
      const entry = (r.entry ?? i) % o.urls.length;
      try {
        samples[i] = await one(pools[entry] as Pool, r, entry, model, o.timeoutMs ?? 300_000);
      } finally {
        waitFor.get(i)?.();
      }
      done++;
      o.onProgress?.(done, reqs.length);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, o.concurrency) }, worker));
  } finally {
    await Promise.all(pools.map((p) => p.close()));
  }
  return samples;
}

async function one(
  pool: Pool,
  r: WorkloadRequest,
  entry: number,
  model: string,
  timeoutMs: number,
): Promise<RequestSample> {
  const body = JSON.stringify({ model, prompt: promptText(r), max_tokens: r.maxTokens, temperature: 0 });
  const t0 = performance.now();
  const base = {
    id: r.id,
    group: r.group,
    entry,
    promptTokens: r.tokens.length,
    cachedTokens: 0,
    servedBy: undefined,
    hops: 0,
  };
  try {
    const res = await pool.request({
      method: "POST",
      path: "/v1/completions",
      headers: { "content-type": "application/json" },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    });
    const json = (await res.body.json()) as CompletionBody;
    const latencyMs = performance.now() - t0;
    if (res.statusCode !== 200) {
      return {
        ...base,
        ok: false,
        status: res.statusCode,
        latencyMs,
        error: `${res.statusCode} ${json.error?.message ?? ""}`.trim(),
        tooLong: res.statusCode === 400 && json.error?.code === CONTEXT_LENGTH_EXCEEDED,
      };
    }
    return {
      ...base,
      ok: true,
      status: 200,
      latencyMs,
      promptTokens: json.usage?.prompt_tokens ?? r.tokens.length,
      cachedTokens: json.usage?.prompt_tokens_details?.cached_tokens ?? 0,
      servedBy: json.prefixmesh?.served_by,
      hops: json.prefixmesh?.hops ?? 0,
      timing: timingOf(json.prefixmesh?.timing_ms),
      fallbacks: json.prefixmesh?.fallbacks ?? 0,
    };
  } catch (err) {
    return {
      ...base,
      ok: false,
      status: 0,
      latencyMs: performance.now() - t0,
      error: (err as Error).message,
    };
  }
}

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  const idx = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[idx] as number;
}

export function summarize(samples: RequestSample[], wallSec: number): ReplaySummary {
  const ok = samples.filter((s) => s.ok);
  const lat = ok.map((s) => s.latencyMs).sort((a, b) => a - b);
  const perNode: Record<string, number> = {};
  for (const s of ok) if (s.servedBy) perNode[s.servedBy] = (perNode[s.servedBy] ?? 0) + 1;
  const errors: Record<string, number> = {};
  let tooLong = 0;
  for (const s of samples) {
    if (s.ok) continue;
    if (s.tooLong) tooLong++;
    else errors[s.error ?? "?"] = (errors[s.error ?? "?"] ?? 0) + 1;
  }
  const prompt = ok.reduce((a, s) => a + s.promptTokens, 0);
  const cached = ok.reduce((a, s) => a + s.cachedTokens, 0);
  const max = Math.max(0, ...Object.values(perNode));
  return {
    requests: samples.length,
    ok: ok.length,
    failed: samples.length - ok.length - tooLong,
    tooLong,
    wallSec,
    meanMs: lat.length ? lat.reduce((a, b) => a + b, 0) / lat.length : Number.NaN,
    p50Ms: percentile(lat, 0.5),
    p99Ms: percentile(lat, 0.99),
    cachedShare: prompt > 0 ? cached / prompt : 0,
    hotspotShare: ok.length ? max / ok.length : 0,
    forwardedShare: ok.length ? ok.filter((s) => s.hops > 0).length / ok.length : 0,
    perNode,
    errors,
    meanTimingMs: meanTiming(ok),
    fallbacks: ok.reduce((a, s) => a + (s.fallbacks ?? 0), 0),
  };
}

function meanTiming(samples: RequestSample[]): TimingMs | undefined {
  const ts = samples.flatMap((s) => (s.timing ? [s.timing] : []));
  if (ts.length === 0) return undefined;
  const mean = (k: keyof TimingMs) => ts.reduce((a, t) => a + t[k], 0) / ts.length;
  return { queue: mean("queue"), prefill: mean("prefill"), decode: mean("decode"), network: mean("network") };
}

/** The id of the model a node serves (the first of its `GET /v1/models`); throws when none is listed. */
export async function modelOf(url: string, timeoutMs = 5000): Promise<string> {
  const r = await fetch(`${url}/v1/models`, { signal: AbortSignal.timeout(timeoutMs) });
  const j = (await r.json()) as { data?: { id: string }[] };
  const id = j.data?.[0]?.id;
  if (!id) throw new Error(`${url} lists no model`);
  return id;
}
