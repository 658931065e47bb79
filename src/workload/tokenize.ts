/**
 * Token ids for simulated workloads, via gpt-tokenizer.
 *
 * Encoding: `cl100k_base` by default. The paper's model (Qwen2.5-0.5B) uses a 151k-entry byte-level
 * BPE whose pre-tokenizer regex is cl100k's, and whose merges start from cl100k's, so cl100k token
 * counts are the closest available stand-in (our mean 5-shot MMLU prompt against the paper's ~540
 * Qwen tokens: BENCHMARKS.md, "Design figures"). `o200k_base` is available for comparison.
 *
 * Prompts are tokenized as prefix + suffix separately when that is provably identical to tokenizing
 * the whole prompt: our prefixes end in "\n\n", which the pre-tokenizer always closes as its own
 * piece when the next character is neither CR nor LF, and BPE never merges across pieces. The shared
 * prefix is then tokenized once per subject, not once per question.
 *
 * Results are cached on disk (`$PREFIXMESH_CACHE_DIR` or `~/.cache/prefixmesh`) keyed by a hash of the
 * inputs, the encoding and the gpt-tokenizer version: a Uint32 file plus a small JSON index.
 */
import { createHash } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join } from "node:path";
import { z } from "zod";
import type { Tokens } from "../core/engine.js";

export const ENCODINGS = ["cl100k_base", "o200k_base"] as const;
export type Encoding = (typeof ENCODINGS)[number];
export const DEFAULT_ENCODING: Encoding = "cl100k_base";

/** Bumped whenever the cached layout or the tokenization scheme changes. */
const CACHE_FORMAT = 1;

type EncodeFn = (text: string) => number[];

const encoders = new Map<Encoding, EncodeFn>();

/** Loads an encoder once (its BPE tables are slow to load). Special-token text is plain text here. */
export async function getEncoder(encoding: Encoding = DEFAULT_ENCODING): Promise<EncodeFn> {
  let fn = encoders.get(encoding);
  if (!fn) {
    const mod =
      encoding === "cl100k_base"
        ? await import("gpt-tokenizer/encoding/cl100k_base")
        : await import("gpt-tokenizer/encoding/o200k_base");
    // User text such as "<|endoftext|>" must not be treated as (or rejected as) a control token.
    const opts = { disallowedSpecial: new Set<string>() };
    fn = (text: string) => mod.encode(text, opts);
    encoders.set(encoding, fn);
  }
  return fn;
}

export function tokenizerVersion(): string {
  const require = createRequire(import.meta.url);
  return (require("gpt-tokenizer/package.json") as { version: string }).version;
}

export function cacheRoot(): string {
  return process.env.PREFIXMESH_CACHE_DIR || join(homedir(), ".cache", "prefixmesh");
}

export interface PromptParts {
  prefix: string;
  suffix: string;
}

/** True when tokenizing prefix and suffix apart gives exactly the tokens of prefix + suffix. */
export function splitIsExact(p: PromptParts): boolean {
  return p.prefix.endsWith("\n\n") && /^[\p{L}\p{N}]/u.test(p.suffix);
}

/** Tokenizes prompts without the disk cache. */
export async function tokenizeUncached(
  prompts: readonly PromptParts[],
  encoding: Encoding,
): Promise<Tokens[]> {
  const encode = await getEncoder(encoding);
  const prefixCache = new Map<string, number[]>();
  return prompts.map((p) => {
    if (!splitIsExact(p)) return Uint32Array.from(encode(p.prefix + p.suffix));
    let pre = prefixCache.get(p.prefix);
    if (!pre) {
      pre = encode(p.prefix);
      prefixCache.set(p.prefix, pre);
    }
    const suf = encode(p.suffix);
    const out = new Uint32Array(pre.length + suf.length);
    out.set(pre, 0);
    out.set(suf, pre.length);
    return out;
  });
}

const IndexSchema = z
  .object({
    format: z.literal(CACHE_FORMAT),
    encoding: z.enum(ENCODINGS),
    count: z.number().int().nonnegative(),
    lengths: z.array(z.number().int().nonnegative()),
  })
  .strict();

export function cacheKey(prompts: readonly PromptParts[], encoding: Encoding): string {
  const h = createHash("sha256");
  h.update(
    `prefixmesh-tokens/${CACHE_FORMAT}/${encoding}/gpt-tokenizer@${tokenizerVersion()}/${prompts.length}\0`,
  );
  for (const p of prompts) {
    // Lengths make the concatenation unambiguous.
    h.update(`${p.prefix.length}:${p.suffix.length}:`);
    h.update(p.prefix);
    h.update(p.suffix);
  }
  return h.digest("hex").slice(0, 32);
}

export interface TokenizeResult {
  tokens: Tokens[];
  encoding: Encoding;
  /** True when read from the disk cache. */
  cached: boolean;
  key: string;
}

/**
 * Tokenizes with the disk cache. `cacheDir: false` disables it; a corrupt or mismatched cache entry
 * is ignored and rewritten, never trusted.
 */
export async function tokenizePrompts(
  prompts: readonly PromptParts[],
  opts: { encoding?: Encoding; cacheDir?: string | false } = {},
): Promise<TokenizeResult> {
  const encoding = opts.encoding ?? DEFAULT_ENCODING;
  const key = cacheKey(prompts, encoding);
  const dir = opts.cacheDir === false ? undefined : join(opts.cacheDir ?? cacheRoot(), "tokens");
  if (dir) {
    const hit = await readCache(dir, key, prompts.length, encoding);
    if (hit) return { tokens: hit, encoding, cached: true, key };
  }
  const tokens = await tokenizeUncached(prompts, encoding);
  if (dir) await writeCache(dir, key, tokens, encoding).catch(() => undefined); // a read-only cache is not fatal
  return { tokens, encoding, cached: false, key };
}

async function readCache(
  dir: string,
  key: string,
  count: number,
  encoding: Encoding,
): Promise<Tokens[] | undefined> {
  try {
    const index = IndexSchema.parse(JSON.parse(await readFile(join(dir, `${key}.json`), "utf8")));
    if (index.count !== count || index.lengths.length !== count || index.encoding !== encoding)
      return undefined;
    const buf = await readFile(join(dir, `${key}.bin`));
    const total = index.lengths.reduce((a, b) => a + b, 0);
    if (buf.byteLength !== total * 4) return undefined;
    // Copy into an aligned buffer (a Buffer may sit at an unaligned offset of a shared pool); little-endian
    // on disk.
    const all = new Uint32Array(total);
    const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    for (let i = 0; i < total; i++) all[i] = view.getUint32(i * 4, true);
    const out: Tokens[] = [];
    let off = 0;
    for (const len of index.lengths) {
      out.push(all.subarray(off, off + len));
      off += len;
    }
    return out;
  } catch {
    return undefined;
  }
}

async function writeCache(dir: string, key: string, tokens: Tokens[], encoding: Encoding): Promise<void> {
  await mkdir(dir, { recursive: true });
  const total = tokens.reduce((a, t) => a + t.length, 0);
  const buf = Buffer.alloc(total * 4);
  let off = 0;
  for (const t of tokens) {
    for (let i = 0; i < t.length; i++, off += 4) buf.writeUInt32LE(t[i]!, off);
  }
  const index = {
    format: CACHE_FORMAT,
    encoding,
    count: tokens.length,
    lengths: tokens.map((t) => t.length),
  };
  // Write-then-rename so a concurrent reader never sees a half-written entry; index last.
  const tmp = `.${process.pid}.${Date.now()}`;
  await writeFile(join(dir, `${key}.bin${tmp}`), buf);
  await rename(join(dir, `${key}.bin${tmp}`), join(dir, `${key}.bin`));
  await writeFile(join(dir, `${key}.json${tmp}`), JSON.stringify(index));
  await rename(join(dir, `${key}.json${tmp}`), join(dir, `${key}.json`));
}

/** Mean of token counts (0 for none). */
export function meanLength(tokens: readonly Tokens[]): number {
  if (tokens.length === 0) return 0;
  let s = 0;
  for (const t of tokens) s += t.length;
  return s / tokens.length;
}
