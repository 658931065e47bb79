/**
 * HTTP for remote engines: undici with explicit connect / headers / body timeouts, and retries with
 * exponential backoff on connection errors, 5xx, 429 and 408 (honouring Retry-After). Only the request
 * phase is retried: once a response streams, failures surface to the caller.
 */
import { Agent, type Dispatcher, request } from "undici";
import { EngineAbortedError, EngineInputError, EngineUnavailableError, stallNote } from "./errors.js";

export interface HttpOptions {
  connectTimeoutMs: number;
  headersTimeoutMs: number;
  bodyTimeoutMs: number;
  retries: number;
  backoffMs: number;
  maxBackoffMs: number;
  apiKey?: string;
}

export const MAX_JSON_BYTES = 8 << 20;

const CLOSED = "the engine was closed: request abandoned";

/** A 408 too: the server gave up waiting for the request, which it never ran (transient). */
const RETRY_STATUS = new Set([408, 429, 500, 502, 503, 504]);
const RETRY_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EAI_AGAIN",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
]);

export function retryAfterMs(header: string | string[] | undefined, nowMs: number): number | undefined {
  const v = Array.isArray(header) ? header[0] : header;
  if (!v) return undefined;
  if (/^\d+(\.\d+)?$/.test(v.trim())) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

/** Waits `ms`, unless `signal` aborts (EngineAbortedError) or `closing` does (its reason). */
const sleep = (ms: number, signal: AbortSignal | undefined, closing: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal?.aborted) return reject(new EngineAbortedError());
    if (closing.aborted) return reject(closing.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      closing.removeEventListener("abort", onClose);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      closing.removeEventListener("abort", onClose);
      reject(new EngineAbortedError());
    };
    const onClose = () => {
      clearTimeout(t);
      signal?.removeEventListener("abort", onAbort);
      reject(closing.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    closing.addEventListener("abort", onClose, { once: true });
  });

async function readLimited(body: Dispatcher.ResponseData["body"], limit: number): Promise<string> {
  let size = 0;
  const parts: Buffer[] = [];
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      throw new EngineUnavailableError(`response body larger than ${limit} bytes`);
    }
    parts.push(chunk);
  }
  return Buffer.concat(parts).toString("utf8");
}

export class HttpClient {
  private readonly agent: Agent;
  /** Aborted by `close()`: its reason is what every request then fails with. */
  private readonly closing = new AbortController();

  constructor(
    private readonly baseUrl: string,
    private readonly opts: HttpOptions,
  ) {
    this.agent = new Agent({
      connect: { timeout: opts.connectTimeoutMs },
      headersTimeout: opts.headersTimeoutMs,
      bodyTimeout: opts.bodyTimeoutMs,
    });
  }

  /** The longest this client waits on a silent server (for headers, or between body chunks). */
  get silenceBoundMs(): number {
    return Math.max(this.opts.headersTimeoutMs, this.opts.bodyTimeoutMs);
  }

  /** How long a response's body may stay silent between chunks. */
  get bodyTimeoutMs(): number {
    return this.opts.bodyTimeoutMs;
  }

  url(path: string): string {
    return `${this.baseUrl.replace(/\/+$/, "")}${path}`;
  }

  /**
   * Sends a request, retrying transient failures, and returns the successful (2xx) response with its
   * body unread. Non-retryable 4xx become EngineInputError; exhausted retries EngineUnavailableError.
   */
  async send(
    method: "GET" | "POST",
    path: string,
    json?: unknown,
    signal?: AbortSignal,
    /** Close the connection after this request (llama-server drops it after a stream anyway). */
    reset = false,
  ): Promise<Dispatcher.ResponseData> {
    const headers: Record<string, string> = { accept: "application/json, text/event-stream" };
    if (json !== undefined) headers["content-type"] = "application/json";
    if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
    let lastError = "";
    let lastStatus: number | undefined;
    let lastRetryAfterMs: number | undefined;
    for (let attempt = 0; ; attempt++) {
      if (this.closing.signal.aborted) throw this.closing.signal.reason;
      if (signal?.aborted) throw new EngineAbortedError();
      let wait = Math.min(
        this.opts.maxBackoffMs,
        this.opts.backoffMs * 2 ** attempt * (0.5 + Math.random() / 2),
      );
      try {
        const res = await request(this.url(path), {
          method,
          headers,
          body: json === undefined ? undefined : JSON.stringify(json),
          dispatcher: this.agent,
          signal,
          reset,
        });
        if (res.statusCode >= 200 && res.statusCode < 300) return res;
        const text = await readLimited(res.body, 64 * 1024).catch(() => "");
        if (!RETRY_STATUS.has(res.statusCode)) {
          const what = `${method} ${path} → HTTP ${res.statusCode}: ${text.slice(0, 300)}`;
          if (res.statusCode >= 400 && res.statusCode < 500) {
            throw new EngineInputError(what, res.statusCode);
          }
          throw new EngineUnavailableError(what, res.statusCode);
        }
        lastError = `HTTP ${res.statusCode}${text ? `: ${text.slice(0, 200)}` : ""}`;
        const ra = retryAfterMs(res.headers["retry-after"], Date.now());
        if (ra !== undefined) wait = Math.min(ra, this.opts.maxBackoffMs);
        lastStatus = res.statusCode;
        lastRetryAfterMs = ra;
      } catch (e) {
        if (e instanceof EngineInputError || e instanceof EngineUnavailableError) throw e;
        if (signal?.aborted) throw new EngineAbortedError();
        const code = (e as { code?: string }).code ?? "";
        if (!RETRY_CODES.has(code)) {
          throw new EngineUnavailableError(
            `${method} ${this.url(path)} failed: ${code || (e as Error).message}${stallNote(code, this.opts)}`,
          );
        }
        lastError = `${code} (${(e as Error).message})`;
        lastStatus = undefined;
        lastRetryAfterMs = undefined;
      }
      if (attempt >= this.opts.retries) {
        throw new EngineUnavailableError(
          `${method} ${this.url(path)} failed after ${attempt + 1} attempt(s): ${lastError}`,
          lastStatus,
          lastRetryAfterMs,
        );
      }
      await sleep(wait, signal, this.closing.signal);
    }
  }

  /** A JSON request with a bounded response. */
  async json(method: "GET" | "POST", path: string, body?: unknown, signal?: AbortSignal): Promise<unknown> {
    const res = await this.send(method, path, body, signal);
    // The body timeout runs here, past send(): its failure too is the engine's, worded for operators.
    const text = await readLimited(res.body, MAX_JSON_BYTES).catch((e: unknown) => {
      if (e instanceof EngineUnavailableError) throw e;
      if (signal?.aborted) throw new EngineAbortedError();
      const code = (e as { code?: unknown }).code;
      const why = `${typeof code === "string" ? code : (e as Error).message}${stallNote(code, this.opts)}`;
      throw new EngineUnavailableError(`${method} ${this.url(path)}: reading the response failed: ${why}`);
    });
    try {
      return JSON.parse(text);
    } catch {
      throw new EngineUnavailableError(`${method} ${path}: response is not JSON: ${text.slice(0, 120)}`);
    }
  }

  /**
   * Ends every request in flight at once, with an EngineUnavailableError (their streams too): a
   * stalled server would otherwise hold the close for the headers or body timeout. The node closes
   * its engine only after its drain, so these requests have had their time.
   */
  close(): Promise<void> {
    if (!this.closing.signal.aborted) this.closing.abort(new EngineUnavailableError(CLOSED));
    return this.agent.destroy(this.closing.signal.reason as EngineUnavailableError);
  }
}
