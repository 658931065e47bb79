/**
 * KV-EVENT PUBLISHER TEST DOUBLE: speaks the wire format of vLLM's and SGLang's ZmqEventPublisher
 * (three-frame PUB messages, a ROUTER replay endpoint answering from a bounded buffer, then the −1
 * end marker) on 127.0.0.1, with the msgpack bytes msgspec writes for each engine's event structs.
 * It runs no engine: tests script the events, and the losses (dropped messages, a short buffer, a
 * silent or absent replay endpoint, a restart).
 *
 * Encodings (see src/engines/kv-events/wire.ts for the sources):
 *  - "vllm-array": vLLM before the switch to maps: batch [ts, events, rank], each event a tagged
 *    array, trailing default fields omitted (msgspec array_like + omit_defaults).
 *  - "vllm-map": vLLM after it: batch still an array, each event a map with `type` first.
 *  - "vllm-map-batch": the newest vLLM source, whose EventBatch is a map too.
 *  - "sglang-array": SGLang: batch [ts, events, attn_dp_rank], events positional up to `medium`.
 *  - "sglang-map": SGLang after its switch to tagged-map events.
 * A Python float is always a float64 in msgspec, an int the smallest msgpack int (unsigned when ≥ 0).
 */
import { Router, XPublisher } from "zeromq";

export type Style = "vllm-array" | "vllm-map" | "vllm-map-batch" | "sglang-array" | "sglang-map";
export type Hash = number | bigint | Uint8Array;

export type DoubleEvent =
  | {
      type: "BlockStored";
      hashes: Hash[];
      parent: Hash | null;
      tokens: number[];
      blockSize: number;
      medium?: string | null;
      loraName?: string | null;
      extraKeys?: (unknown[] | null)[] | null;
      groupIdx?: number | null;
    }
  | { type: "BlockRemoved"; hashes: Hash[]; medium?: string | null; remaining?: number[] }
  | { type: "AllBlocksCleared" };

/** A float64 on the wire whatever its value (msgspec writes every Python float so). */
export class F64 {
  constructor(readonly value: number) {}
}

/** msgpack as msgspec writes it: smallest ints (unsigned when ≥ 0), float64, str, bin, array, map. */
export function msgpack(v: unknown): Uint8Array {
  const out: number[] = [];
  const big = (n: bigint, bytes: number) => {
    const m = BigInt.asUintN(8 * bytes, n);
    for (let i = bytes - 1; i >= 0; i--) out.push(Number((m >> BigInt(8 * i)) & 0xffn));
  };
  /** A type byte, then `n` in `bytes` big-endian bytes. */
  const head = (code: number, n: bigint, bytes: number) => {
    out.push(code);
    big(n, bytes);
  };
  const int = (n: bigint) => {
    if (n >= 0n) {
      if (n < 128n) out.push(Number(n));
      else if (n < 256n) head(0xcc, n, 1);
      else if (n < 65536n) head(0xcd, n, 2);
      else if (n < 1n << 32n) head(0xce, n, 4);
      else head(0xcf, n, 8);
    } else if (n >= -32n) out.push(Number(BigInt.asUintN(8, n)));
    else if (n >= -128n) head(0xd0, n, 1);
    else if (n >= -32768n) head(0xd1, n, 2);
    else if (n >= -(1n << 31n)) head(0xd2, n, 4);
    else head(0xd3, n, 8);
  };
  const len = (n: number, fix: number, fixMax: number, c8: number | null, c16: number, c32: number) => {
    if (n <= fixMax) out.push(fix | n);
    else if (c8 !== null && n < 256) out.push(c8, n);
    else if (n < 65536) head(c16, BigInt(n), 2);
    else head(c32, BigInt(n), 4);
  };
  const write = (x: unknown): void => {
    if (x === null || x === undefined) out.push(0xc0);
    else if (x === true) out.push(0xc3);
    else if (x === false) out.push(0xc2);
    else if (x instanceof F64) {
      out.push(0xcb);
      const b = new Uint8Array(8);
      new DataView(b.buffer).setFloat64(0, x.value);
      out.push(...b);
    } else if (typeof x === "number") {
      if (Number.isInteger(x)) int(BigInt(x));
      else write(new F64(x));
    } else if (typeof x === "bigint") int(x);
    else if (typeof x === "string") {
      const b = Buffer.from(x, "utf8");
      len(b.length, 0xa0, 31, 0xd9, 0xda, 0xdb);
      out.push(...b);
    } else if (x instanceof Uint8Array) {
      len(x.length, 0, -1, 0xc4, 0xc5, 0xc6);
      out.push(...x);
    } else if (Array.isArray(x)) {
      len(x.length, 0x90, 15, null, 0xdc, 0xdd);
      for (const e of x) write(e);
    } else if (x instanceof Map) {
      len(x.size, 0x80, 15, null, 0xde, 0xdf);
      for (const [k, e] of x) {
        write(k);
        write(e);
      }
    } else throw new Error(`msgpack double: cannot write ${typeof x}`);
  };
  write(v);
  return Uint8Array.from(out);
}

/** A tagged struct as an array: the tag, then the fields, trailing defaults dropped. */
function positional(tag: string, fields: [unknown, boolean][]): unknown[] {
  let end = fields.length;
  while (end > 0 && fields[end - 1]![1] && fields[end - 1]![0] === null) end--;
  return [tag, ...fields.slice(0, end).map(([v]) => v)];
}

/** A tagged struct as a map: `type` first, defaults omitted. */
function named(tag: string, fields: [string, unknown, boolean][]): Map<string, unknown> {
  const m = new Map<string, unknown>([["type", tag]]);
  for (const [k, v, hasDefault] of fields) if (!(hasDefault && v === null)) m.set(k, v);
  return m;
}

export function encodeEvent(style: Style, e: DoubleEvent): unknown {
  const sglang = style.startsWith("sglang");
  const map = style !== "vllm-array" && style !== "sglang-array";
  if (e.type === "AllBlocksCleared") return map ? new Map([["type", e.type]]) : [e.type];
  if (e.type === "BlockRemoved") {
    const medium = e.medium === undefined ? (sglang ? null : "GPU") : e.medium;
    const f: [string, unknown, boolean][] = sglang
      ? [
          ["block_hashes", e.hashes, false],
          ["medium", medium, true],
        ]
      : [
          ["block_hashes", e.hashes, false],
          ["medium", medium, false],
          ["group_idx", null, true],
          ["remaining_copy_counts", e.remaining ?? null, true],
        ];
    return map
      ? named(e.type, f)
      : positional(
          e.type,
          f.map(([, v, d]) => [v, d]),
        );
  }
  const medium = e.medium === undefined ? "GPU" : e.medium;
  const f: [string, unknown, boolean][] = sglang
    ? [
        ["block_hashes", e.hashes, false],
        ["parent_block_hash", e.parent, false],
        ["token_ids", e.tokens, false],
        ["block_size", e.blockSize, false],
        ["lora_id", null, false],
        ["medium", medium, true],
      ]
    : [
        ["block_hashes", e.hashes, false],
        ["parent_block_hash", e.parent, false],
        ["token_ids", e.tokens, false],
        ["block_size", e.blockSize, false],
        ["lora_id", null, false],
        ["medium", medium, false],
        ["lora_name", e.loraName ?? null, false],
        ["extra_keys", e.extraKeys ?? null, true],
        ["group_idx", e.groupIdx ?? null, true],
        ["kv_cache_spec_kind", e.groupIdx !== undefined ? "full_attention" : null, true],
      ];
  return map
    ? named(e.type, f)
    : positional(
        e.type,
        f.map(([, v, d]) => [v, d]),
      );
}

export function encodeBatch(
  style: Style,
  events: DoubleEvent[],
  ts: number,
  rank: number | null,
): Uint8Array {
  const evs = events.map((e) => encodeEvent(style, e));
  if (style === "vllm-map-batch") {
    const m = new Map<string, unknown>([
      ["ts", new F64(ts)],
      ["events", evs],
    ]);
    if (rank !== null) m.set("data_parallel_rank", rank);
    return msgpack(m);
  }
  return msgpack(rank === null ? [new F64(ts), evs] : [new F64(ts), evs, rank]);
}

export interface DoubleOptions {
  style?: Style;
  topic?: string;
  /** Batches kept for replay (vLLM and SGLang: 10 000). */
  bufferSteps?: number;
  /** "answer": as the engines do; "silent": reads requests, never answers; "none": no endpoint. */
  replay?: "answer" | "silent" | "none";
  rank?: number | null;
  /** Bind here (another double's addresses: a publisher process started again), not on new ports. */
  bindAt?: { endpoint: string; replayEndpoint: string };
  /** SGLang with a snapshot endpoint: live topic frames carry `\0sgl-kv-epoch=EPOCH`. */
  epoch?: string;
}

export class KvEventPublisherDouble {
  readonly style: Style;
  private seq = 0;
  private buffer: { seq: number; payload: Uint8Array }[] = [];
  private readonly pub = new XPublisher({ linger: 0 });
  private readonly router: Router | undefined;
  private subscriptions = 0;
  private subscribedWaiters: (() => void)[] = [];
  private readonly loops: Promise<void>[] = [];
  private closed = false;
  /** Replay requests seen (first sequence number asked for). */
  readonly replayRequests: number[] = [];
  /** The connection (ROUTER routing id, hex) each replay request came on. */
  readonly replayConnections: string[] = [];
  /** The next this many replays send their batches but no end marker (cut off by the node's deadline). */
  unterminatedReplays = 0;
  private replayGate: Promise<void> | undefined;
  endpoint = "";
  replayEndpoint = "";

  /** The epoch the topic frames carry (SGLang with a snapshot endpoint), if any. */
  epoch: string | undefined;

  private constructor(private readonly opts: Required<Omit<DoubleOptions, "bindAt" | "epoch">>) {
    this.style = opts.style;
    if (opts.replay !== "none") this.router = new Router({ linger: 0 });
  }

  static async start(opts: DoubleOptions = {}): Promise<KvEventPublisherDouble> {
    const d = new KvEventPublisherDouble({
      style: opts.style ?? "vllm-array",
      topic: opts.topic ?? "kv-events",
      bufferSteps: opts.bufferSteps ?? 10_000,
      replay: opts.replay ?? "answer",
      rank: opts.rank === undefined ? 0 : opts.rank,
    });
    d.epoch = opts.epoch;
    await bindAt(d.pub, opts.bindAt?.endpoint);
    d.endpoint = d.pub.lastEndpoint!;
    d.loops.push(d.watchSubscriptions());
    if (d.router) {
      await bindAt(d.router, opts.bindAt?.replayEndpoint);
      d.replayEndpoint = d.router.lastEndpoint!;
      d.loops.push(d.serveReplays(d.router));
    }
    return d;
  }

  /** Resolves once a subscriber has subscribed (so nothing published after is lost to it). */
  subscribed(): Promise<void> {
    if (this.subscriptions > 0) return Promise.resolve();
    return new Promise((r) => this.subscribedWaiters.push(r));
  }

  get nextSeq(): number {
    return this.seq;
  }

  /** Publishes one batch (buffered for replay); `drop`: buffered but never sent live (a lost message). */
  async publish(events: DoubleEvent[], opt: { drop?: boolean; payload?: Uint8Array } = {}): Promise<number> {
    const seq = this.seq++;
    const payload = opt.payload ?? encodeBatch(this.style, events, 1_700_000_000 + seq / 10, this.opts.rank);
    this.buffer.push({ seq, payload });
    if (this.buffer.length > this.opts.bufferSteps) this.buffer.shift();
    const topic = this.opts.topic + (this.epoch === undefined ? "" : `\u0000sgl-kv-epoch=${this.epoch}`);
    if (!opt.drop) await this.pub.send([Buffer.from(topic), seq8(seq), payload]);
    return seq;
  }

  /** Sends arbitrary frames on the PUB socket (malformed-input tests); nothing is buffered. */
  async sendRaw(frames: (Uint8Array | string)[]): Promise<void> {
    await this.pub.send(frames);
  }

  /**
   * Replay requests from now on wait to be answered until the returned function is called (a busy
   * engine), each then answered from the buffer as it is by then.
   */
  holdReplays(): () => void {
    let release!: () => void;
    this.replayGate = new Promise<void>((r) => {
      release = r;
    });
    return () => {
      this.replayGate = undefined;
      release();
    };
  }

  /**
   * A new publisher process on the same ports: numbering restarts at 0, the buffer is empty; its
   * topic frames carry `epoch` if given.
   */
  restart(epoch?: string): void {
    this.seq = 0;
    this.buffer = [];
    if (epoch !== undefined) this.epoch = epoch;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.pub.close();
    this.router?.close();
    await Promise.allSettled(this.loops);
  }

  private async watchSubscriptions(): Promise<void> {
    try {
      for await (const [frame] of this.pub) {
        if (frame && frame[0] === 1) {
          this.subscriptions++;
          for (const w of this.subscribedWaiters.splice(0)) w();
        } else if (frame && frame[0] === 0) this.subscriptions--;
      }
    } catch (e) {
      if (!this.closed) throw e;
    }
  }

  private async serveReplays(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        if (frames.length !== 3) continue;
        const [id, , start] = frames as [Buffer, Buffer, Buffer];
        const from = Number(start.readBigUInt64BE(0));
        this.replayRequests.push(from);
        this.replayConnections.push(id.toString("hex"));
        if (this.opts.replay === "silent") continue;
        if (this.replayGate) await this.replayGate;
        for (const b of this.buffer)
          if (b.seq >= from) await router.send([id, Buffer.alloc(0), seq8(b.seq), b.payload]);
        if (this.unterminatedReplays > 0) {
          this.unterminatedReplays--;
          continue;
        }
        await router.send([id, Buffer.alloc(0), seq8(-1), Buffer.alloc(0)]);
      }
    } catch (e) {
      if (!this.closed) throw e;
    }
  }
}

/**
 * Binds `endpoint` (a new port without one). A port a closed socket held is freed by ZMQ's I/O
 * thread a moment after `close()`: binding it at once sometimes finds it still in use, so retry.
 */
async function bindAt(sock: { bind(address: string): Promise<void> }, endpoint: string | undefined) {
  if (endpoint === undefined) return sock.bind("tcp://127.0.0.1:*");
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      return await sock.bind(endpoint);
    } catch (e) {
      if (Date.now() > deadline || !/in use/i.test((e as Error).message)) throw e;
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}

export function seq8(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(BigInt(n));
  return b;
}
