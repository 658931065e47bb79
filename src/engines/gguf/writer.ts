/**
 * A minimal GGUF v3 writer: metadata + tensor infos in memory, tensor data streamed to disk
 * tensor by tensor so a model's weights never sit in memory twice.
 */
import { closeSync, openSync, writeSync } from "node:fs";
import { alignUp, GGML_BLOCK, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GgufValueType } from "./format.js";

export type GgufValue =
  | { type: "u32"; value: number }
  | { type: "i32"; value: number }
  | { type: "f32"; value: number }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string }
  | { type: "string[]"; value: string[] }
  | { type: "f32[]"; value: ArrayLike<number> }
  | { type: "i32[]"; value: ArrayLike<number> };

export interface GgufTensorSpec {
  name: string;
  /** ggml order: dims[0] is the contiguous (row) dimension. */
  dims: number[];
  ggmlType: number;
  /** Writes exactly the tensor's byte size into the returned buffers (may be called in pieces). */
  data: () => Iterable<Uint8Array>;
}

class ByteSink {
  private chunks: Buffer[] = [];
  length = 0;
  push(b: Buffer): void {
    this.chunks.push(b);
    this.length += b.length;
  }
  private fixed(size: number, write: (b: Buffer) => void): void {
    const b = Buffer.alloc(size);
    write(b);
    this.push(b);
  }
  u32(v: number): void {
    this.fixed(4, (b) => b.writeUInt32LE(v >>> 0));
  }
  i32(v: number): void {
    this.fixed(4, (b) => b.writeInt32LE(v));
  }
  u64(v: number): void {
    this.fixed(8, (b) => b.writeBigUInt64LE(BigInt(v)));
  }
  f32(v: number): void {
    this.fixed(4, (b) => b.writeFloatLE(v));
  }
  str(s: string): void {
    const bytes = Buffer.from(s, "utf8");
    this.u64(bytes.length);
    this.push(bytes);
  }
  toBuffer(): Buffer {
    return Buffer.concat(this.chunks, this.length);
  }
}

export function tensorByteSize(dims: number[], ggmlType: number): number {
  const block = GGML_BLOCK[ggmlType];
  if (!block) throw new Error(`unsupported ggml type ${ggmlType}`);
  const n = dims.reduce((a, b) => a * b, 1);
  if (n % block[0] !== 0) throw new Error(`tensor size ${n} is not a multiple of block ${block[0]}`);
  return (n / block[0]) * block[1];
}

function writeValue(sink: ByteSink, v: GgufValue): void {
  switch (v.type) {
    case "u32":
      sink.u32(GgufValueType.UINT32);
      sink.u32(v.value);
      return;
    case "i32":
      sink.u32(GgufValueType.INT32);
      sink.i32(v.value);
      return;
    case "f32":
      sink.u32(GgufValueType.FLOAT32);
      sink.f32(v.value);
      return;
    case "bool":
      sink.u32(GgufValueType.BOOL);
      sink.push(Buffer.from([v.value ? 1 : 0]));
      return;
    case "string":
      sink.u32(GgufValueType.STRING);
      sink.str(v.value);
      return;
    case "string[]":
      sink.u32(GgufValueType.ARRAY);
      sink.u32(GgufValueType.STRING);
      sink.u64(v.value.length);
      for (const s of v.value) sink.str(s);
      return;
    case "f32[]":
    case "i32[]": {
      sink.u32(GgufValueType.ARRAY);
      sink.u32(v.type === "f32[]" ? GgufValueType.FLOAT32 : GgufValueType.INT32);
      sink.u64(v.value.length);
      const b = Buffer.alloc(4 * v.value.length);
      for (let i = 0; i < v.value.length; i++) {
        if (v.type === "f32[]") b.writeFloatLE(v.value[i]!, 4 * i);
        else b.writeInt32LE(v.value[i]!, 4 * i);
      }
      sink.push(b);
      return;
    }
  }
}

/** Writes a complete GGUF v3 file at `path` (the caller handles temp-file + rename). */
export function writeGguf(path: string, metadata: [string, GgufValue][], tensors: GgufTensorSpec[]): void {
  const alignment = GGUF_DEFAULT_ALIGNMENT;
  const head = new ByteSink();
  head.u32(GGUF_MAGIC);
  head.u32(3);
  head.u64(tensors.length);
  head.u64(metadata.length);
  for (const [key, value] of metadata) {
    head.str(key);
    writeValue(head, value);
  }
  let offset = 0;
  const sizes: number[] = [];
  for (const t of tensors) {
    const size = tensorByteSize(t.dims, t.ggmlType);
    sizes.push(size);
    head.str(t.name);
    head.u32(t.dims.length);
    for (const d of t.dims) head.u64(d);
    head.u32(t.ggmlType);
    head.u64(offset);
    offset = alignUp(offset + size, alignment);
  }
  const headBuf = head.toBuffer();
  const fd = openSync(path, "w");
  try {
    writeSync(fd, headBuf);
    let pos = headBuf.length;
    const pad = (to: number) => {
      if (to > pos) writeSync(fd, Buffer.alloc(to - pos));
      pos = to;
    };
    pad(alignUp(pos, alignment));
    tensors.forEach((t, i) => {
      const start = pos;
      for (const chunk of t.data()) {
        writeSync(fd, chunk);
        pos += chunk.length;
      }
      if (pos - start !== sizes[i])
        throw new Error(`tensor ${t.name}: wrote ${pos - start} bytes, expected ${sizes[i]}`);
      pad(alignUp(pos, alignment));
    });
  } finally {
    closeSync(fd);
  }
}
