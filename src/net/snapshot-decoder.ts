/**
 * Decodes snapshot frames for the peer server. A frame above `inlineBytes` is decoded on a worker
 * thread, so a snapshot at the size cap (megabytes of keys) does not hold the event loop while its
 * every byte is checked; small ones (deltas, heartbeats: nearly all traffic) decode inline, where a
 * hop to the worker would cost more than the decode. One worker, started on first use; at most
 * `maxQueued` frames wait for it (each up to the size cap), beyond that a frame is refused as busy.
 * Where the worker's compiled file is absent (running from TypeScript sources) every frame decodes
 * inline.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { Snapshot } from "../core/snapshot.js";
import { decodeSnapshot } from "../core/snapshot-codec.js";
import type { DecodeJob, DecodeReply } from "./snapshot-decode-worker.js";

export type SnapshotDecoded = { ok: true; snapshot: Snapshot } | { ok: false; error: string; busy?: true };

export interface SnapshotDecoderOptions {
  /** Frames up to this many bytes decode inline (default 256 KiB). */
  inlineBytes?: number;
  /** Frames waiting for the worker at most (default 4). */
  maxQueued?: number;
  /** The worker's compiled file (default: snapshot-decode-worker.js beside this one). */
  workerUrl?: URL;
}

export class SnapshotDecoder {
  private readonly inlineBytes: number;
  private readonly maxQueued: number;
  private worker: Worker | undefined;
  private readonly waiting = new Map<number, (r: SnapshotDecoded) => void>();
  private nextId = 1;
  private readonly workerUrl: URL;
  private readonly hasWorker: boolean;

  constructor(opts: SnapshotDecoderOptions = {}) {
    this.inlineBytes = opts.inlineBytes ?? 256 * 1024;
    this.maxQueued = opts.maxQueued ?? 4;
    this.workerUrl = opts.workerUrl ?? new URL("./snapshot-decode-worker.js", import.meta.url);
    this.hasWorker = existsSync(fileURLToPath(this.workerUrl));
  }

  /** Whether large frames go to a worker thread (false: everything decodes inline). */
  get offThread(): boolean {
    return this.hasWorker;
  }

  /**
   * Decodes a frame given whole or as the chunks it arrived in (joined on the worker for a large one).
   * A large frame's chunks that are all of their buffers are handed over (detached here): the caller
   * no longer reads them.
   */
  decode(frame: Uint8Array | readonly Uint8Array[], maxBytes: number): Promise<SnapshotDecoded> {
    const chunks = frame instanceof Uint8Array ? [frame] : frame;
    let length = 0;
    for (const c of chunks) length += c.byteLength;
    if (!this.hasWorker || length <= this.inlineBytes) {
      return Promise.resolve(
        decodeInline(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks), maxBytes),
      );
    }
    if (this.waiting.size >= this.maxQueued) {
      return Promise.resolve({ ok: false, error: "snapshot decoder busy", busy: true });
    }
    const worker = this.start();
    const id = this.nextId++;
    // Transferred, not copied, when a chunk is all of its buffer (a large body, and a socket read's
    // chunk, is: Node pools only small buffers). Otherwise a copy of our own travels.
    const sent: Uint8Array[] = [];
    const transfer = new Set<ArrayBuffer>();
    for (const c of chunks) {
      const whole = c.byteOffset === 0 && c.byteLength === c.buffer.byteLength;
      const own = whole && c.buffer instanceof ArrayBuffer && !transfer.has(c.buffer) ? c : c.slice();
      transfer.add(own.buffer as ArrayBuffer);
      sent.push(own);
    }
    return new Promise((resolve) => {
      this.waiting.set(id, resolve);
      const job: DecodeJob = { id, chunks: sent, maxBytes };
      worker.postMessage(job, [...transfer]);
    });
  }

  /** Stops the worker; frames still waiting are refused. */
  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    this.failAll("snapshot decoder closed");
    if (w) await w.terminate();
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(this.workerUrl);
    w.unref();
    w.on("message", (r: DecodeReply) => {
      const resolve = this.waiting.get(r.id);
      this.waiting.delete(r.id);
      resolve?.(r.ok ? { ok: true, snapshot: r.snapshot } : { ok: false, error: r.error });
    });
    // A dead worker refuses what it held; the next large frame starts a new one.
    const dead = (why: string) => {
      if (this.worker === w) this.worker = undefined;
      this.failAll(why);
    };
    w.on("error", (err) => dead(`snapshot decoder failed: ${err.message}`));
    w.on("exit", () => dead("snapshot decoder exited"));
    this.worker = w;
    return w;
  }

  private failAll(error: string): void {
    const pending = [...this.waiting.values()];
    this.waiting.clear();
    for (const resolve of pending) resolve({ ok: false, error, busy: true });
  }
}

function decodeInline(bytes: Uint8Array, maxBytes: number): SnapshotDecoded {
  try {
    return { ok: true, snapshot: decodeSnapshot(bytes, { maxBytes }) };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
}
