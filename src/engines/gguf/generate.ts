/**
 * The built-in model generator: a llama-architecture GGUF v3 with deterministic random weights (seeded)
 * and the generated SentencePiece-style tokenizer. It produces text of no meaning, but it costs what a
 * real model of its shape costs, so prefix-cache timing is realistic on machines without a real model.
 * Generated once into a cache directory keyed by every parameter, then reused.
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { GgmlType } from "./format.js";
import {
  type GeneratedModelParams,
  GeneratedModelSchema,
  MODEL_PRESETS,
  type ModelPreset,
} from "./presets.js";
import { buildSpmVocab } from "./vocab.js";
import { type GgufTensorSpec, type GgufValue, writeGguf } from "./writer.js";

export { type GeneratedModelParams, MODEL_PRESETS, type ModelPreset, parameterCount } from "./presets.js";

export function defaultCacheDir(): string {
  return process.env.PREFIXMESH_CACHE_DIR
    ? join(process.env.PREFIXMESH_CACHE_DIR, "models")
    : join(homedir(), ".cache", "prefixmesh", "models");
}

/** Returns the path of the generated model, generating it first if the cache lacks it. */
export function ensureGeneratedModel(
  preset: ModelPreset | GeneratedModelParams,
  cacheDir: string = defaultCacheDir(),
): string {
  const params = GeneratedModelSchema.parse(typeof preset === "string" ? MODEL_PRESETS[preset] : preset);
  if (params.embedding % params.heads !== 0) throw new Error("embedding must be divisible by heads");
  const key = createHash("sha256")
    .update(`v1:${JSON.stringify(params)}`)
    .digest("hex")
    .slice(0, 16);
  const file = join(cacheDir, `prefixmesh-llama-${params.embedding}x${params.layers}-${key}.gguf`);
  if (existsSync(file)) return file;
  mkdirSync(cacheDir, { recursive: true });
  // Temp file + rename: concurrent generators (parallel test workers) never see a half-written file.
  const tmp = `${file}.${process.pid}.${Date.now()}.tmp`;
  try {
    writeGguf(tmp, metadata(params), tensors(params));
    renameSync(tmp, file);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  return file;
}

function metadata(p: GeneratedModelParams): [string, GgufValue][] {
  const vocab = buildSpmVocab(p.vocab);
  return [
    ["general.architecture", { type: "string", value: "llama" }],
    ["general.name", { type: "string", value: `prefixmesh-generated-${p.embedding}x${p.layers}` }],
    ["general.alignment", { type: "u32", value: 32 }],
    ["general.file_type", { type: "u32", value: p.weights === "q8_0" ? 7 : 0 }],
    ["llama.context_length", { type: "u32", value: p.contextLength }],
    ["llama.embedding_length", { type: "u32", value: p.embedding }],
    ["llama.block_count", { type: "u32", value: p.layers }],
    ["llama.feed_forward_length", { type: "u32", value: p.feedForward }],
    ["llama.rope.dimension_count", { type: "u32", value: p.embedding / p.heads }],
    ["llama.attention.head_count", { type: "u32", value: p.heads }],
    ["llama.attention.head_count_kv", { type: "u32", value: p.heads }],
    ["llama.attention.layer_norm_rms_epsilon", { type: "f32", value: 1e-5 }],
    ["llama.vocab_size", { type: "u32", value: p.vocab }],
    ["prefixmesh.generator.seed", { type: "u32", value: p.seed }],
    ["tokenizer.ggml.model", { type: "string", value: "llama" }],
    ["tokenizer.ggml.tokens", { type: "string[]", value: vocab.tokens }],
    ["tokenizer.ggml.scores", { type: "f32[]", value: vocab.scores }],
    ["tokenizer.ggml.token_type", { type: "i32[]", value: vocab.types }],
    ["tokenizer.ggml.bos_token_id", { type: "u32", value: 1 }],
    ["tokenizer.ggml.eos_token_id", { type: "u32", value: 2 }],
    ["tokenizer.ggml.unknown_token_id", { type: "u32", value: 0 }],
    ["tokenizer.ggml.add_bos_token", { type: "bool", value: true }],
    ["tokenizer.ggml.add_eos_token", { type: "bool", value: false }],
    ...(p.chatTemplate
      ? [["tokenizer.chat_template", { type: "string", value: p.chatTemplate }] as [string, GgufValue]]
      : []),
  ];
}

/** xorshift32: tiny, fast and deterministic across platforms. */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 0x9e3779b9;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

function f32ToF16(v: number): number {
  const f = new Float32Array([v]);
  const x = new Uint32Array(f.buffer)[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = ((x >>> 23) & 0xff) - 127 + 15;
  const mant = x & 0x7fffff;
  if (exp <= 0) return sign; // our scales never underflow to subnormals that matter
  if (exp >= 31) return sign | 0x7c00;
  return sign | (exp << 10) | Math.round(mant / 8192);
}

const CHUNK_BLOCKS = 4096;

/** Uniform random weights with the given standard deviation, as q8_0 blocks or f32. */
function* randomWeights(
  n: number,
  std: number,
  kind: "q8_0" | "f32",
  next: () => number,
): Iterable<Uint8Array> {
  const amax = std * Math.sqrt(3);
  if (kind === "f32") {
    for (let done = 0; done < n; ) {
      const m = Math.min(n - done, CHUNK_BLOCKS * 32);
      const out = new Float32Array(m);
      for (let i = 0; i < m; i++) out[i] = ((next() / 0xffffffff) * 2 - 1) * amax;
      done += m;
      yield new Uint8Array(out.buffer);
    }
    return;
  }
  const scale = f32ToF16(amax / 127);
  const blocks = n / 32;
  for (let done = 0; done < blocks; ) {
    const m = Math.min(blocks - done, CHUNK_BLOCKS);
    const out = Buffer.alloc(m * 34);
    for (let b = 0; b < m; b++) {
      const o = b * 34;
      out.writeUInt16LE(scale, o);
      for (let i = 0; i < 32; i += 4) {
        const r = next();
        // four int8 quants in [-127, 127] per 32 random bits
        out.writeInt8(((r & 0xff) % 255) - 127, o + 2 + i);
        out.writeInt8((((r >>> 8) & 0xff) % 255) - 127, o + 3 + i);
        out.writeInt8((((r >>> 16) & 0xff) % 255) - 127, o + 4 + i);
        out.writeInt8(((r >>> 24) % 255) - 127, o + 5 + i);
      }
    }
    done += m;
    yield out;
  }
}

function tensors(p: GeneratedModelParams): GgufTensorSpec[] {
  const next = rng(p.seed);
  const wType = p.weights === "q8_0" ? GgmlType.Q8_0 : GgmlType.F32;
  const ones = (n: number): GgufTensorSpec["data"] =>
    function* () {
      yield new Uint8Array(new Float32Array(n).fill(1).buffer);
    };
  // Weights draw from one stream in file order, so the same parameters give the same bytes.
  const dense = (
    name: string,
    inDim: number,
    outDim: number,
    std = 1 / Math.sqrt(inDim),
  ): GgufTensorSpec => ({
    name,
    dims: [inDim, outDim],
    ggmlType: wType,
    data: () => randomWeights(inDim * outDim, std, p.weights, next),
  });
  const e = p.embedding;
  const list: GgufTensorSpec[] = [dense("token_embd.weight", e, p.vocab, 1)];
  for (let l = 0; l < p.layers; l++) {
    const b = `blk.${l}`;
    list.push(
      { name: `${b}.attn_norm.weight`, dims: [e], ggmlType: GgmlType.F32, data: ones(e) },
      dense(`${b}.attn_q.weight`, e, e),
      dense(`${b}.attn_k.weight`, e, e),
      dense(`${b}.attn_v.weight`, e, e),
      dense(`${b}.attn_output.weight`, e, e),
      { name: `${b}.ffn_norm.weight`, dims: [e], ggmlType: GgmlType.F32, data: ones(e) },
      dense(`${b}.ffn_gate.weight`, e, p.feedForward),
      dense(`${b}.ffn_up.weight`, e, p.feedForward),
      dense(`${b}.ffn_down.weight`, p.feedForward, e),
    );
  }
  list.push({ name: "output_norm.weight", dims: [e], ggmlType: GgmlType.F32, data: ones(e) });
  list.push(dense("output.weight", e, p.vocab));
  return list;
}
