/**
 * A raw HTTP client for boundary fuzzing: sends exactly the method, path, headers and bytes it is
 * given (no JSON encoding, no content-type of its own), reads the whole answer (streams included)
 * and fails if that takes longer than a deadline; plus the check every fuzzed answer must pass.
 */
import { connect } from "node:net";

export interface RawRequest {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: Buffer | string;
}

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

const summary = (r: RawRequest) => `${r.method} ${r.path.slice(0, 120)}`;

/** `r` printed short: fast-check names its counterexample with it (the seed reproduces it whole). */
export function shortPrint(r: RawRequest): string {
  const cut = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…(${s.length} chars)` : s);
  const body =
    r.body === undefined ? "" : ` body=${JSON.stringify(cut(Buffer.from(r.body).toString("utf8"), 300))}`;
  return `${r.method} ${cut(r.path, 200)} headers=${cut(JSON.stringify(r.headers ?? {}), 400)}${body}`;
}

/** `r` as the bytes of one HTTP/1.1 request on a connection the server then closes. */
function requestBytes(r: RawRequest): Buffer {
  const body = r.body === undefined ? undefined : Buffer.from(r.body);
  const head = [`${r.method} ${r.path} HTTP/1.1`, "Host: 127.0.0.1", "Connection: close"];
  for (const [k, v] of Object.entries(r.headers ?? {})) head.push(`${k}: ${v}`);
  if (body) head.push(`Content-Length: ${body.length}`);
  return Buffer.concat([Buffer.from(`${head.join("\r\n")}\r\n\r\n`, "latin1"), body ?? Buffer.alloc(0)]);
}

/**
 * Sends `r` to `base` (http://host:port) on a connection of its own, as raw bytes (Node's client
 * refuses to send some of what the fuzz makes and to read some answers to it); rejects past
 * `deadlineMs`.
 */
export async function send(base: string, r: RawRequest, deadlineMs: number): Promise<RawAnswer> {
  const a = await sendBytes(base, requestBytes(r), deadlineMs);
  // An answer to HEAD is judged by its raw bytes: it must have none after its head.
  if (r.method === "HEAD") return a;
  const te = a.headers["transfer-encoding"];
  return typeof te === "string" && /chunked/i.test(te) ? { ...a, body: dechunk(a.body) } : a;
}

/** A chunked body's content (as far as it is well formed). */
function dechunk(b: Buffer): Buffer {
  const parts: Buffer[] = [];
  for (let at = 0; at < b.length; ) {
    const eol = b.indexOf("\r\n", at);
    if (eol < 0) break;
    const n = Number.parseInt(b.toString("latin1", at, eol), 16);
    if (!(n > 0)) break;
    parts.push(b.subarray(eol + 2, eol + 2 + n));
    at = eol + 2 + n + 2;
  }
  return Buffer.concat(parts);
}

/**
 * Writes `bytes` (a whole request, however malformed) on a fresh TCP connection and reads until the
 * server closes it (the request asks it to); the status line and body are parsed from what came back.
 */
export function sendBytes(
  base: string,
  bytes: Buffer,
  deadlineMs: number,
  /** Half-close after the bytes (as for a request cut short); else the server closes first. */
  halfClose = false,
): Promise<RawAnswer> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const parts: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(
          `connection not answered and closed within ${deadlineMs} ms: ${bytes.toString("latin1", 0, 80)}`,
        ),
      );
    }, deadlineMs);
    socket.on("data", (c: Buffer) => parts.push(c));
    socket.on("error", () => {}); // a reset after the answer is the server closing: judged by what came
    socket.on("close", () => {
      clearTimeout(timer);
      const all = Buffer.concat(parts);
      const split = all.indexOf("\r\n\r\n");
      const head = all.toString("latin1", 0, split < 0 ? all.length : split);
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
      const headers: Record<string, string> = {};
      for (const line of head.split("\r\n").slice(1)) {
        const i = line.indexOf(":");
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      resolve({ status, headers, body: split < 0 ? Buffer.alloc(0) : all.subarray(split + 4) });
    });
    // A client that half-closes is gone to Node's server, which then drops a request in flight.
    if (halfClose) socket.end(bytes);
    else socket.write(bytes);
  });
}

/** The error message of an error body: OpenAI's `{error: {message}}` or the peer port's `{error}`. */
export function errorMessage(body: Buffer): string | undefined {
  let json: unknown;
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
  const e = (json as { error?: unknown } | null)?.error;
  if (typeof e === "string") return e;
  const m = (e as { message?: unknown } | null | undefined)?.message;
  return typeof m === "string" ? m : undefined;
}

/** The OpenAI error body's `code`, if any. */
function errorCode(body: Buffer): unknown {
  try {
    return (JSON.parse(body.toString("utf8")) as { error?: { code?: unknown } }).error?.code;
  } catch {
    return undefined;
  }
}

/**
 * The bytes after a HEAD answer's head that are no further answer's head: a body. (A request whose
 * own body turns out malformed after it was answered may get a second, bodiless answer for that.)
 */
function bytesAfterHeads(rest: Buffer): number {
  let at = 0;
  while (at < rest.length && rest.toString("latin1", at, at + 7) === "HTTP/1.") {
    const end = rest.indexOf("\r\n\r\n", at);
    if (end < 0) return 0;
    at = end + 4;
  }
  return rest.length - at;
}

/** Which error shape a port documents (docs/api.md): the client port's OpenAI one, the peer port's. */
export type ErrorShape = "openai" | "peer";

/**
 * Why `body` is not an error in `shape`, or undefined: OpenAI's `{error: {message, type, param,
 * code}}` (message and type non-empty strings, param and code a string or null), or the peer port's
 * `{error}` with a non-empty message and nothing of fastify's own (`statusCode`, a top-level
 * `message`).
 */
export function shapeBreach(body: Buffer, shape: ErrorShape): string | undefined {
  let json: unknown;
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch {
    return "not JSON";
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return "not a JSON object";
  const o = json as Record<string, unknown>;
  if ("statusCode" in o || "message" in o) return "fastify's own error shape";
  const e = o.error;
  if (shape === "peer")
    return typeof e === "string" && e.length > 0 ? undefined : "no {error: message} of the peer port";
  if (typeof e !== "object" || e === null) return "no OpenAI {error: {...}}";
  const { message, type, param, code } = e as Record<string, unknown>;
  const strOrNull = (v: unknown) => v === null || typeof v === "string";
  if (typeof message !== "string" || message.length === 0) return "OpenAI error without a message";
  if (typeof type !== "string" || type.length === 0) return "OpenAI error without a type";
  if (!strOrNull(param) || !strOrNull(code)) return "OpenAI error's param or code not a string or null";
  return undefined;
}

/**
 * Why an answer breaks the boundary's rule, or undefined if it keeps it: a 2xx; a 4xx with an error
 * in the port's shape; a 503 or 429 with Retry-After; the documented `504 deadline_exceeded` of a
 * request that set its own deadline (docs/api.md). Nothing else. Every error (4xx or 5xx) has the
 * port's shape; an answer to HEAD has no body bytes at all, whatever its status (HTTP forbids one,
 * and a keep-alive client would take them for the next answer).
 */
export function breach(r: RawRequest, a: RawAnswer, shape: ErrorShape): string | undefined {
  const what = `${summary(r)} → ${a.status} ${a.body.toString("utf8", 0, 300)}`;
  const extra = r.method === "HEAD" ? bytesAfterHeads(a.body) : 0;
  if (extra > 0) return `a HEAD answer with ${extra} body bytes: ${what}`;
  if (a.status >= 200 && a.status < 300) return undefined;
  if (a.status < 400 || a.status >= 600) return `not a 2xx, 4xx or 5xx: ${what}`;
  if (r.method !== "HEAD") {
    const why = shapeBreach(a.body, shape);
    if (why) return `${why}: ${what}`;
  }
  if (a.status === 503 || a.status === 429) {
    return a.headers["retry-after"] === undefined ? `overload without Retry-After: ${what}` : undefined;
  }
  if (a.status === 504 && r.headers?.["x-prefixmesh-deadline-ms"] !== undefined) {
    return errorCode(a.body) === "deadline_exceeded" ? undefined : `504 not for the deadline: ${what}`;
  }
  if (a.status >= 500) return `not a 2xx or 4xx: ${what}`;
  return undefined;
}
