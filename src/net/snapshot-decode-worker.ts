/**
 * The worker thread behind `SnapshotDecoder` (snapshot-decoder.ts): decodes snapshot frames with the
 * core codec off the daemon's event loop and hands the keys back without copying (transferred).
 */
import { parentPort } from "node:worker_threads";
import type { Snapshot } from "../core/snapshot.js";
import { decodeSnapshot } from "../core/snapshot-codec.js";

export interface DecodeJob {
  id: number;
  /** The frame, in the chunks it arrived in (joined here, off the event loop). */
  chunks: Uint8Array[];
  maxBytes: number;
}

/** One buffer from `chunks`; a frame above `maxBytes` is refused before anything is copied. */
function join(chunks: Uint8Array[], maxBytes: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  let n = 0;
  for (const c of chunks) n += c.byteLength;
  if (n > maxBytes) throw new Error(`frame of ${n} bytes exceeds ${maxBytes}`);
  const out = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

export type DecodeReply =
  | { id: number; ok: true; snapshot: Snapshot }
  | { id: number; ok: false; error: string };

/** The typed arrays a decoded snapshot owns (their buffers travel back transferred). */
export function snapshotBuffers(s: Snapshot): ArrayBuffer[] {
  const arrays =
    s.kind === "full" ? [s.body.keys] : s.kind === "delta" ? [s.delta.added, s.delta.removed] : [];
  const out = new Set<ArrayBuffer>();
  for (const a of arrays) if (a.buffer instanceof ArrayBuffer && a.buffer.byteLength > 0) out.add(a.buffer);
  return [...out];
}

parentPort?.on("message", (job: DecodeJob) => {
  let reply: DecodeReply;
  try {
    const bytes = join(job.chunks, job.maxBytes);
    reply = { id: job.id, ok: true, snapshot: decodeSnapshot(bytes, { maxBytes: job.maxBytes }) };
  } catch (err) {
    reply = { id: job.id, ok: false, error: (err as Error).message };
  }
  parentPort?.postMessage(reply, reply.ok ? snapshotBuffers(reply.snapshot) : []);
});
