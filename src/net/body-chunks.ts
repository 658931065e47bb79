/**
 * A request body kept as the chunks it arrived in, for the snapshot endpoint: a frame at the size cap
 * is megabytes, and joining it into one buffer on the event loop (allocation, page faults, copy) held
 * the loop for tens of milliseconds on a busy machine. The snapshot decoder hands the chunks to its
 * worker thread, which joins them there; in HMAC mode the body's digest is taken chunk by chunk. Bounded like
 * any body: a declared or received length above `limit` is a 413, a body shorter or longer than its declared
 * length a 400.
 */
import { createHash } from "node:crypto";
import type { FastifyRequest } from "fastify";

export interface BodyChunks {
  chunks: Buffer[];
  length: number;
  /** The body's SHA-256 (hex), hashed chunk by chunk as it arrived, when asked for (HMAC mode). */
  sha256?: string;
}

export function isBodyChunks(x: unknown): x is BodyChunks {
  return typeof x === "object" && x !== null && Array.isArray((x as BodyChunks).chunks);
}

class BodyError extends Error {
  constructor(
    readonly statusCode: 400 | 413,
    message: string,
  ) {
    super(message);
  }
}

/**
 * A Fastify content-type parser (the `(req, payload, done)` form) that keeps the chunks; with
 * `digest`, it hashes them as they arrive (an HMAC signature covers the body's SHA-256: hashing
 * megabytes at once would hold the event loop as long as joining them did).
 */
export function bodyChunksParser(limit: number, digest = false) {
  return (
    req: FastifyRequest,
    payload: NodeJS.ReadableStream,
    done: (err: Error | null, body?: BodyChunks) => void,
  ): void => {
    const declared = Number(req.headers["content-length"]);
    if (declared > limit) {
      done(new BodyError(413, `request body is too large (limit ${limit} bytes)`));
      return;
    }
    const body: BodyChunks = { chunks: [], length: 0 };
    const hash = digest ? createHash("sha256") : undefined;
    let finished = false;
    const finish = (err: Error | null) => {
      if (finished) return;
      finished = true;
      payload.removeListener("data", onData);
      payload.removeListener("end", onEnd);
      payload.removeListener("error", onError);
      if (err) done(err);
      else done(null, body);
    };
    const onData = (chunk: Buffer | string) => {
      const b = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      body.length += b.byteLength;
      if (body.length > limit) {
        finish(new BodyError(413, `request body is too large (limit ${limit} bytes)`));
        return;
      }
      body.chunks.push(b);
      hash?.update(b);
    };
    const onEnd = () => {
      if (!Number.isNaN(declared) && declared !== body.length) {
        finish(new BodyError(400, "request body length differs from its content-length"));
        return;
      }
      if (hash) body.sha256 = hash.digest("hex");
      finish(null);
    };
    const onError = (err: Error) => finish(new BodyError(400, `request body: ${err.message}`));
    payload.on("data", onData);
    payload.on("end", onEnd);
    payload.on("error", onError);
    payload.resume();
  };
}
