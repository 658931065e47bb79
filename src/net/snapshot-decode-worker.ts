/**
 * The worker thread behind `SnapshotDecoder` (snapshot-decoder.ts): decodes snapshot frames with the
 * core codec off the daemon's event loop and hands the keys back without copying (transferred).
 */
import { parentPort } from "node:worker_threads";
import type { Snapshot } from "../core/snapshot.js";
import { decodeSnapshot } from "../core/snapshot-codec.js";

export interface DecodeJob {
  id: number;
  bytes: Uint8Array;
  maxBytes: number;
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
    reply = { id: job.id, ok: true, snapshot: decodeSnapshot(job.bytes, { maxBytes: job.maxBytes }) };
  } catch (err) {
    reply = { id: job.id, ok: false, error: (err as Error).message };
  }
  parentPort?.postMessage(reply, reply.ok ? snapshotBuffers(reply.snapshot) : []);
});
