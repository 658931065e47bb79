/**
 * Trace replay: a JSONL file, one request per line:
 *   {"prompt": "...", "arrival_ms": 12.5, "entry": 2}   or   {"tokens": [1, 2, 3], ...}
 * Optional: "id", "group", "max_tokens". Either every line has `arrival_ms` (open loop, non-decreasing)
 * or none does (closed loop). Every line is validated; errors name the file and line. Sizes are bounded
 * (bytes per line, tokens per request, request count) so a hostile trace cannot exhaust memory.
 */
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { z } from "zod";
import { DEFAULT_ENCODING, ENCODINGS, type Encoding, getEncoder, meanLength } from "./tokenize.js";
import type { Workload, WorkloadRequest } from "./types.js";

export class TraceError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TraceError";
  }
}

export interface TraceLimits {
  maxLineBytes: number;
  maxTokens: number;
  maxRequests: number;
  maxFileBytes: number;
}

export const DEFAULT_TRACE_LIMITS: TraceLimits = {
  maxLineBytes: 4 * 1024 * 1024,
  maxTokens: 131_072,
  maxRequests: 1_000_000,
  maxFileBytes: 1024 * 1024 * 1024,
};

function lineSchema(limits: TraceLimits) {
  return z
    .object({
      id: z.string().min(1).max(256).optional(),
      prompt: z.string().max(limits.maxLineBytes).optional(),
      tokens: z.array(z.number().int().min(0).max(0xffff_ffff)).min(1).max(limits.maxTokens).optional(),
      arrival_ms: z.number().finite().min(0).optional(),
      entry: z.number().int().min(0).max(1_000_000).optional(),
      group: z.string().min(1).max(256).optional(),
      max_tokens: z.number().int().min(0).max(1_000_000).optional(),
    })
    .strict()
    .refine((v) => (v.prompt === undefined) !== (v.tokens === undefined), {
      message: 'exactly one of "prompt" or "tokens" is required',
    });
}

export interface TraceOptions {
  encoding?: Encoding;
  limits?: Partial<TraceLimits>;
  /** Entry nodes must be < this (the cluster size), when known. */
  nodes?: number;
}

function describeZodError(err: z.ZodError): string {
  return err.issues.map((i) => (i.path.length ? `${i.path.join(".")}: ${i.message}` : i.message)).join("; ");
}

/** Parses trace lines. `file` labels errors. */
export async function parseTrace(
  lines: AsyncIterable<string> | Iterable<string>,
  file: string,
  opts: TraceOptions = {},
) {
  const limits = { ...DEFAULT_TRACE_LIMITS, ...opts.limits };
  const schema = lineSchema(limits);
  const encoding = opts.encoding ?? DEFAULT_ENCODING;
  if (!ENCODINGS.includes(encoding)) throw new TraceError(`unknown encoding ${encoding}`);
  let encode: ((t: string) => number[]) | undefined;
  const requests: WorkloadRequest[] = [];
  let lineNo = 0;
  let timed: boolean | undefined;
  let lastArrival = 0;
  let usedText = false;
  for await (const raw of lines) {
    lineNo++;
    const where = `${file}:${lineNo}`;
    if (Buffer.byteLength(raw, "utf8") > limits.maxLineBytes) {
      throw new TraceError(`${where}: line longer than ${limits.maxLineBytes} bytes`);
    }
    const line = raw.trim();
    if (line === "") continue;
    if (requests.length >= limits.maxRequests)
      throw new TraceError(`${where}: more than ${limits.maxRequests} requests`);
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (err) {
      throw new TraceError(`${where}: invalid JSON (${(err as Error).message})`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) throw new TraceError(`${where}: ${describeZodError(parsed.error)}`);
    const v = parsed.data;
    const hasArrival = v.arrival_ms !== undefined;
    if (timed === undefined) timed = hasArrival;
    else if (timed !== hasArrival) {
      throw new TraceError(`${where}: "arrival_ms" must be on every line or on none (closed loop)`);
    }
    if (hasArrival) {
      if (v.arrival_ms! < lastArrival) {
        throw new TraceError(
          `${where}: arrival_ms ${v.arrival_ms} is earlier than the previous line's ${lastArrival}`,
        );
      }
      lastArrival = v.arrival_ms!;
    }
    if (opts.nodes !== undefined && v.entry !== undefined && v.entry >= opts.nodes) {
      throw new TraceError(
        `${where}: entry ${v.entry} is not a node index (cluster has ${opts.nodes} nodes)`,
      );
    }
    let tokens: Uint32Array;
    if (v.tokens) tokens = Uint32Array.from(v.tokens);
    else {
      encode ??= await getEncoder(encoding);
      usedText = true;
      tokens = Uint32Array.from(encode(v.prompt!));
      if (tokens.length === 0) throw new TraceError(`${where}: empty prompt`);
      if (tokens.length > limits.maxTokens) {
        throw new TraceError(`${where}: prompt has ${tokens.length} tokens, limit ${limits.maxTokens}`);
      }
    }
    const r: WorkloadRequest = {
      id: v.id ?? `t${requests.length}`,
      tokens,
      group: v.group ?? "trace",
      maxTokens: v.max_tokens ?? 1,
    };
    if (v.prompt !== undefined) r.prompt = v.prompt;
    if (v.entry !== undefined) r.entry = v.entry;
    if (hasArrival) r.arrivalMs = v.arrival_ms!;
    requests.push(r);
  }
  if (requests.length === 0) throw new TraceError(`${file}: no requests`);
  return { requests, timed: timed ?? false, encoding: usedText ? encoding : undefined };
}

/** Loads a JSONL trace file as a Workload. */
export async function loadTrace(file: string, opts: TraceOptions = {}): Promise<Workload> {
  const limits = { ...DEFAULT_TRACE_LIMITS, ...opts.limits };
  let size: number;
  try {
    size = (await stat(file)).size;
  } catch (err) {
    throw new TraceError(`cannot read trace ${file}: ${(err as Error).message}`);
  }
  if (size > limits.maxFileBytes)
    throw new TraceError(`${file}: ${size} bytes exceeds ${limits.maxFileBytes}`);
  const stream = createReadStream(file);
  try {
    const lines = boundedLines(stream, limits.maxLineBytes, file);
    const { requests, timed, encoding } = await parseTrace(lines, file, opts);
    return {
      name: "trace",
      synthetic: false,
      requests,
      arrival: timed ? "open-loop" : "closed-loop",
      meta: {
        source: "trace",
        schedule: timed ? "trace arrivals" : "trace order, closed loop",
        ...(encoding ? { encoding } : {}),
        meanPromptTokens: meanLength(requests.map((r) => r.tokens)),
        poolSize: requests.length,
        repeatedRequests: countRepeats(requests),
      },
    };
  } finally {
    stream.destroy();
  }
}

function countRepeats(requests: readonly WorkloadRequest[]): number {
  const seen = new Set<string>();
  let n = 0;
  for (const r of requests) {
    const key = Buffer.from(r.tokens.buffer, r.tokens.byteOffset, r.tokens.byteLength).toString("base64");
    if (seen.has(key)) n++;
    else seen.add(key);
  }
  return n;
}

/**
 * Splits a byte stream into UTF-8 lines (LF or CRLF), failing as soon as one line exceeds `maxBytes`
 * — unlike readline, which would buffer an endless line whole.
 */
export async function* boundedLines(
  chunks: AsyncIterable<Buffer | string>,
  maxBytes: number,
  file: string,
): AsyncGenerator<string> {
  let parts: Buffer[] = [];
  let size = 0;
  let lineNo = 1;
  const take = (): string => {
    let buf = Buffer.concat(parts, size);
    if (buf.length > 0 && buf[buf.length - 1] === 13) buf = buf.subarray(0, buf.length - 1);
    parts = [];
    size = 0;
    lineNo++;
    return buf.toString("utf8");
  };
  for await (const c of chunks) {
    const chunk = typeof c === "string" ? Buffer.from(c) : c;
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      size += nl - start;
      if (size > maxBytes + 1) throw new TraceError(`${file}:${lineNo}: line longer than ${maxBytes} bytes`);
      parts.push(chunk.subarray(start, nl));
      yield take();
      start = nl + 1;
    }
    size += chunk.length - start;
    if (size > maxBytes + 1) throw new TraceError(`${file}:${lineNo}: line longer than ${maxBytes} bytes`);
    parts.push(chunk.subarray(start));
  }
  if (size > 0) yield take();
}
