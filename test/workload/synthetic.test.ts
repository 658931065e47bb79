import { describe, expect, it } from "vitest";
import { COMMON_WORD_COUNT, commonWords } from "../../src/workload/common-words.js";
import { hitRate, idealHits } from "../../src/workload/ideal-hit.js";
import { syntheticMmlu, syntheticPool, wordsFor } from "../../src/workload/synthetic.js";

describe("synthetic MMLU", () => {
  it("has MMLU's shape: 57 topics, 14,042 prompts, ~685-token mean, shared per-topic prefixes", () => {
    const w = syntheticMmlu({ seed: 1 });
    expect(w.synthetic).toBe(true);
    expect(w.requests).toHaveLength(14_042);
    expect(new Set(w.requests.map((r) => r.group)).size).toBe(57);
    const mean = w.meta!.meanPromptTokens;
    expect(mean).toBeGreaterThan(640);
    expect(mean).toBeLessThan(730);
    expect(w.requests.every((r) => r.maxTokens === 1 && r.tokens.every((t) => t < 100_000))).toBe(true);
    // Prompts of one topic share their prefix; the ideal hit rate is near the real pool's 86%.
    const ideal = hitRate(w.requests, idealHits(w.requests));
    expect(ideal).toBeGreaterThan(0.8);
    expect(ideal).toBeLessThan(0.9);
  });

  it("is deterministic: prompt contents by poolSeed, order by seed", () => {
    const a = syntheticPool({ scale: 0.05 });
    const b = syntheticPool({ scale: 0.05 });
    expect(a.map((x) => [...x.tokens])).toEqual(b.map((x) => [...x.tokens]));
    const c = syntheticPool({ scale: 0.05, poolSeed: 99 });
    expect(c[0]!.tokens).not.toEqual(a[0]!.tokens);
  });

  it("can carry prompt text, one common word per token, keeping the shared prefixes", () => {
    const words = commonWords();
    expect(new Set(words).size).toBe(COMMON_WORD_COUNT);
    expect(words.every((w) => /^[a-z]{2,}$/.test(w))).toBe(true);
    const pool = syntheticPool({ scale: 0.05, subjects: 2, text: words });
    const [a, b] = pool;
    expect(a!.prompt).toMatch(
      /^The following are multiple choice questions \(with answers\) about topic 00\./,
    );
    const body = (p: string) =>
      p
        .split("\n\n")[1]!
        .replace(/\nAnswer:$/, "")
        .split(" ");
    // One word per token: the text is as long as the workload says, in words.
    expect(body(a!.prompt!)).toHaveLength(a!.tokens.length);
    expect(body(a!.prompt!)).toEqual(Array.from(a!.tokens, (t) => words[t % words.length]));
    // Two questions of a topic share its prefix of tokens, and so of words.
    let shared = 0;
    while (a!.tokens[shared] === b!.tokens[shared]) shared++;
    expect(shared).toBeGreaterThan(0);
    expect(body(a!.prompt!).slice(0, shared)).toEqual(body(b!.prompt!).slice(0, shared));
    expect(wordsFor([0, 1001], ["x", "y"])).toBe("x y");
  });

  it("rejects bad sizes", () => {
    expect(() => syntheticPool({ subjects: 0 })).toThrow(/subjects/);
    expect(() => syntheticPool({ scale: -1 })).toThrow(/scale/);
  });
});

describe("ideal hit", () => {
  it("equals the brute-force longest common prefix with any earlier request", () => {
    const w = syntheticMmlu({ seed: 4, scale: 0.02, skewed: true });
    const reqs = w.requests.slice(0, 150);
    const fast = idealHits(reqs);
    reqs.forEach((r, i) => {
      let best = 0;
      for (let j = 0; j < i; j++) {
        const o = reqs[j]!.tokens;
        let k = 0;
        while (k < o.length && k < r.tokens.length && o[k] === r.tokens[k]) k++;
        best = Math.max(best, k);
      }
      expect(fast[i]).toBe(best);
    });
    expect(fast[0]).toBe(0);
  });
});
