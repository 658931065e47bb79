/**
 * Soak (SOAK=1, ~1 min): the field failure's shape — one engine with 2 slots, 2 saved states and a
 * 4096-token slot context replaying skewed 5-shot MMLU prompts, so states are saved and reloaded all
 * the time. Before the fix ~7% of requests failed with "Failed to load state from file".
 */
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../src/engines/gguf/generate.js";
import { LlamaCppEngine } from "../../src/engines/llamacpp/engine.js";
import { loadMmlu } from "../../src/workload/mmlu.js";
import { buildFewShotPrompts } from "../../src/workload/prompts.js";
import { TEST_MODEL_CACHE } from "./helpers.js";

const MMLU = resolve(import.meta.dirname, "../../../shared/datasets/mmlu");
const enabled = process.env.SOAK === "1" && existsSync(MMLU);
if (!enabled) console.warn(`skipping the MMLU saved-state soak: needs SOAK=1 and ${MMLU}`);

describe.skipIf(!enabled)("llama.cpp saved states under MMLU-skewed prompts (soak)", () => {
  it("150 requests over 6 subjects: none fails, states load", async () => {
    const ds = await loadMmlu(MMLU, { minDev: 5 });
    const subjects = ds.subjects.slice(0, 6);
    const bySubject = subjects.map((s) => buildFewShotPrompts(ds).filter((p) => p.subject === s));
    const engine = await LlamaCppEngine.create({
      modelPath: ensureGeneratedModel("small", TEST_MODEL_CACHE),
      slots: 2,
      slotContext: 4096,
      maxSavedStates: 2,
    });
    let seed = 12345; // LCG: the same request sequence every run
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const weights = subjects.map((_, k) => 1 / (k + 1)); // Zipf-like skew over subjects
    const total = weights.reduce((a, b) => a + b, 0);
    const failures: string[] = [];
    let prompt = 0;
    let cached = 0;
    const t0 = performance.now();
    try {
      for (let i = 0; i < 150; i++) {
        let r = rnd() * total;
        let k = 0;
        while (k < weights.length - 1 && r > weights[k]!) r -= weights[k++]!;
        const pool = bySubject[k]!;
        const tokens = await engine.tokenize(pool[Math.floor(rnd() * pool.length)]!.prompt);
        try {
          const res = await engine.run({ id: `m${i}`, tokens, maxTokens: 1 });
          prompt += res.promptTokens;
          cached += res.cachedTokens;
        } catch (e) {
          failures.push((e as Error).message);
        }
      }
      const stats = engine.stateStats();
      console.log(
        `MMLU soak: 150 requests in ${((performance.now() - t0) / 1000).toFixed(1)} s, ` +
          `${failures.length} failed, hit ${((100 * cached) / Math.max(prompt, 1)).toFixed(1)}% of prompt tokens`,
        stats,
      );
      expect(failures).toEqual([]);
      expect(stats.loadFailures).toBe(0);
      expect(stats.loads).toBeGreaterThan(5);
    } finally {
      await engine.close();
    }
  }, 300_000);
});
