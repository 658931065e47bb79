/**
 * Reading what a peer answers over HTTP: a forward's NDJSON answer stream record by record, and any
 * other body up to a bound.
 */
import { StringDecoder } from "node:string_decoder";
import type { ResponseOpener } from "./auth/response-mac.js";
import { TransportError } from "./transport-error.js";
import type { ReplyMsg } from "./transport-wire.js";
import { streamRecordSchema } from "./wire-schemas.js";

/** Longest record of an answer stream. */
const MAX_LINE = 16 * 1024 * 1024;

/**
 * Reads a forward's NDJSON answer with plain stream events (no async iterator: fewer promises and
 * microtask hops per record): `onChunk` per chunk record, resolving on the final record. The tail after
 * it is drained in the background (the connection's reuse); a broken tail only costs the connection.
 */
export function readForwardStream(
  id: string,
  body: NodeJS.ReadableStream & { destroy(err?: Error): void },
  onChunk: (text: string) => void,
  /** Shared-secret mode: each record's tag is checked (response-mac.ts); a wrong one garbles the answer. */
  opener?: ResponseOpener,
): Promise<ReplyMsg> {
  return new Promise<ReplyMsg>((resolve, reject) => {
    let buf = "";
    let settled = false;
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      reject(err);
    };
    // A decoder, not Buffer#toString per chunk: a multi-byte character may straddle two chunks
    // (undici's body stream ignores setEncoding).
    const utf8 = new StringDecoder("utf8");
    body.on("data", (piece: Buffer) => {
      if (settled) return; // the answer is in: discard the tail
      try {
        buf += utf8.write(piece);
        if (buf.length > MAX_LINE) throw new TransportError("protocol", `peer ${id}: stream record too long`);
        let nl = buf.indexOf("\n");
        while (nl >= 0) {
          const rec = parseRecord(id, buf.slice(0, nl), opener);
          buf = buf.slice(nl + 1);
          if (rec.t === "msg") {
            settled = true;
            resolve(rec.msg);
            return;
          }
          onChunk(rec.text);
          nl = buf.indexOf("\n");
        }
      } catch (err) {
        fail(err);
        body.destroy();
      }
    });
    body.on("error", fail);
    body.on("end", () =>
      fail(new TransportError("cut-off", `peer ${id}: answer stream ended before its final record`)),
    );
  });
}

function parseRecord(id: string, line: string, opener: ResponseOpener | undefined) {
  const authentic = opener ? opener.record(line) : line;
  if (authentic === undefined)
    throw new TransportError("protocol", `peer ${id}: stream record fails its response MAC`, undefined, true);
  let json: unknown;
  try {
    json = JSON.parse(authentic);
  } catch {
    throw new TransportError("protocol", `peer ${id}: malformed stream record`);
  }
  const r = streamRecordSchema.safeParse(json);
  if (!r.success) throw new TransportError("protocol", `peer ${id}: invalid stream record`);
  return r.data;
}

/** A whole body's bytes, up to `max` (what a response MAC covers). */
export async function readBoundedBytes(
  body: AsyncIterable<unknown> & { destroy(): void },
  max: number,
): Promise<Buffer> {
  const parts: Buffer[] = [];
  let n = 0;
  for await (const c of body) {
    parts.push(c as Buffer);
    n += (c as Buffer).length;
    if (n > max) {
      body.destroy();
      break;
    }
  }
  const all = Buffer.concat(parts);
  return all.length > max ? all.subarray(0, max) : all;
}
