/**
 * The paper's workload: every MMLU test question as a 5-shot prompt (its subject's dev examples as the
 * shared prefix), tokenized, then scheduled uniformly or with skew.
 */
import { z } from "zod";
import { assembleWorkload, type PoolItem, type ScheduleChoice, scheduleName } from "./assemble.js";
import { loadMmlu, MmluError } from "./mmlu.js";
import { buildFewShotPrompts } from "./prompts.js";
import type { SkewOptions } from "./schedule.js";
import { DEFAULT_ENCODING, ENCODINGS, type Encoding, tokenizePrompts } from "./tokenize.js";
import type { Workload } from "./types.js";

export interface MmluWorkloadOptions extends ScheduleChoice {
  /** Folder with dev/ and test/ (e.g. ../shared/datasets/mmlu). */
  dir: string;
  skewed?: boolean | Partial<SkewOptions>;
  encoding?: Encoding;
  /** Tokenized-pool disk cache folder, or false for none (default: $PREFIXMESH_CACHE_DIR or ~/.cache/prefixmesh). */
  cacheDir?: string | false;
  /** Few-shot examples per prompt (paper: 5). */
  k?: number;
}

const OptionsSchema = z.object({
  dir: z.string().min(1),
  seed: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER),
  requests: z.number().int().min(1).max(10_000_000).optional(),
  encoding: z.enum(ENCODINGS).optional(),
  k: z.number().int().min(0).max(5).optional(),
  nodes: z.number().int().min(1).max(100_000).optional(),
  openLoopRate: z.number().positive().finite().optional(),
});

export interface MmluPool {
  items: PoolItem[];
  encoding: Encoding;
  /** True when the tokens came from the disk cache. */
  cached: boolean;
}

const pools = new Map<string, Promise<MmluPool>>();

/** Loads, builds and tokenizes every test prompt once per process (and once per machine via the disk cache). */
export function loadMmluPool(
  dir: string,
  opts: { encoding?: Encoding; cacheDir?: string | false; k?: number } = {},
): Promise<MmluPool> {
  const encoding = opts.encoding ?? DEFAULT_ENCODING;
  const key = JSON.stringify([dir, encoding, opts.cacheDir ?? null, opts.k ?? 5]);
  let p = pools.get(key);
  if (!p) {
    p = (async () => {
      const ds = await loadMmlu(dir, { minDev: opts.k ?? 5 });
      const prompts = buildFewShotPrompts(ds, { k: opts.k ?? 5 });
      const tok = await tokenizePrompts(prompts, { encoding, cacheDir: opts.cacheDir });
      const items = prompts.map((pr, i) => ({
        id: pr.id,
        group: pr.subject,
        tokens: tok.tokens[i]!,
        prompt: pr.prompt,
      }));
      return { items, encoding, cached: tok.cached };
    })();
    // A failed load must not poison later attempts.
    p.catch(() => pools.delete(key));
    pools.set(key, p);
  }
  return p;
}

export async function mmluWorkload(opts: MmluWorkloadOptions): Promise<Workload> {
  const checked = OptionsSchema.safeParse({
    dir: opts.dir,
    seed: opts.seed,
    requests: opts.requests,
    encoding: opts.encoding,
    k: opts.k,
    nodes: opts.nodes,
    openLoopRate: opts.openLoopRate,
  });
  if (!checked.success) {
    const why = checked.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ");
    throw new MmluError(`invalid MMLU workload options: ${why}`);
  }
  const pool = await loadMmluPool(opts.dir, opts);
  const name = scheduleName("mmlu", opts.skewed);
  return assembleWorkload(name, "mmlu", pool.items, opts, { encoding: pool.encoding });
}
