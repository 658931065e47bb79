import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadMmlu } from "../../src/workload/mmlu.js";
import { mmluWorkload } from "../../src/workload/mmlu-workload.js";
import { buildFewShotPrompts } from "../../src/workload/prompts.js";
import { getEncoder, splitIsExact, tokenizePrompts } from "../../src/workload/tokenize.js";
import { boundedLines, loadTrace, parseTrace } from "../../src/workload/trace.js";

const MMLU_DIR = resolve(__dirname, "../../../shared/datasets/mmlu");
const haveMmlu = existsSync(join(MMLU_DIR, "test"));
if (!haveMmlu) console.warn(`[skip] real-MMLU tokenizer tests: ${MMLU_DIR} is absent`);

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "pm-tok-"));
});
afterAll(() => rm(tmp, { recursive: true, force: true }));

describe("tokenization", () => {
  it("split tokenization equals whole-prompt tokenization, and the disk cache round-trips", async () => {
    const prompts = [
      {
        prefix: "The following are questions about x.\n\nQ1?\nAnswer: A\n\n",
        suffix: "What is 2+2?\nAnswer:",
      },
      {
        prefix: "The following are questions about x.\n\nQ1?\nAnswer: A\n\n",
        suffix: "\nLeading newline\nAnswer:",
      },
      { prefix: "P\n\n", suffix: " <|endoftext|> is plain text here" },
    ];
    expect(prompts.map(splitIsExact)).toEqual([true, false, false]);
    const encode = await getEncoder();
    const dir = join(tmp, "cache");
    const first = await tokenizePrompts(prompts, { cacheDir: dir });
    expect(first.cached).toBe(false);
    first.tokens.forEach((t, i) => {
      expect([...t]).toEqual(encode(prompts[i]!.prefix + prompts[i]!.suffix));
    });
    const again = await tokenizePrompts(prompts, { cacheDir: dir });
    expect(again.cached).toBe(true);
    expect(again.tokens.map((t) => [...t])).toEqual(first.tokens.map((t) => [...t]));
    // A corrupt entry is ignored and rewritten, never trusted.
    const bin = (await readdir(join(dir, "tokens"))).find((f) => f.endsWith(".bin"))!;
    await writeFile(join(dir, "tokens", bin), Buffer.alloc(3));
    const healed = await tokenizePrompts(prompts, { cacheDir: dir });
    expect(healed.cached).toBe(false);
    expect(healed.tokens.map((t) => [...t])).toEqual(first.tokens.map((t) => [...t]));
  });

  it.skipIf(!haveMmlu)("real prompts: split tokenization is exact for a whole subject", async () => {
    const ds = await loadMmlu(MMLU_DIR, { subjects: ["college_mathematics"] });
    const prompts = buildFewShotPrompts(ds);
    const encode = await getEncoder();
    const { tokens } = await tokenizePrompts(prompts, { cacheDir: false });
    prompts.forEach((p, i) => {
      expect([...tokens[i]!]).toEqual(encode(p.prompt));
    });
  });

  it.skipIf(!haveMmlu)("the MMLU workload: 14,042 prompts, mean length reported, cached reruns", async () => {
    const w = await mmluWorkload({ dir: MMLU_DIR, seed: 1, cacheDir: join(tmp, "mmlu") });
    expect(w.requests).toHaveLength(14_042);
    expect(w.synthetic).toBe(false);
    expect(w.meta!.meanPromptTokens).toBeGreaterThan(600);
    expect(w.meta!.meanPromptTokens).toBeLessThan(760);
    expect(w.requests[0]!.prompt!.endsWith("\nAnswer:")).toBe(true);
    const skewed = await mmluWorkload({ dir: MMLU_DIR, seed: 1, skewed: true, cacheDir: join(tmp, "mmlu") });
    const hot = new Set(skewed.meta!.hotGroups);
    const share = skewed.requests.filter((r) => hot.has(r.group)).length / skewed.requests.length;
    expect(Math.abs(share - 0.8)).toBeLessThan(0.02);
  });
});

describe("trace replay", () => {
  const parse = (lines: string[], opts = {}) => parseTrace(lines, "t.jsonl", opts);

  it("reads prompts and token ids, arrival times and entries", async () => {
    const r = await parse([
      '{"prompt": "hello world", "arrival_ms": 0, "entry": 1}',
      "",
      '{"tokens": [5, 6, 7], "arrival_ms": 2.5, "group": "g", "max_tokens": 4}',
    ]);
    expect(r.timed).toBe(true);
    expect(r.requests).toHaveLength(2);
    expect(r.requests[0]!.tokens.length).toBeGreaterThan(0);
    expect(r.requests[0]).toMatchObject({ entry: 1, arrivalMs: 0, prompt: "hello world" });
    expect([...r.requests[1]!.tokens]).toEqual([5, 6, 7]);
    expect(r.requests[1]).toMatchObject({ group: "g", maxTokens: 4 });
  });

  it("errors name the line", async () => {
    await expect(parse(['{"tokens": [1]}', "{nope"])).rejects.toThrow(/t\.jsonl:2: invalid JSON/);
    await expect(parse(['{"tokens": [1], "prompt": "x"}'])).rejects.toThrow(/t\.jsonl:1: exactly one of/);
    await expect(parse(['{"tokens": [-1]}'])).rejects.toThrow(/t\.jsonl:1: tokens\.0/);
    await expect(parse(['{"tokens": [1], "extra": 1}'])).rejects.toThrow(/t\.jsonl:1: .*extra/);
    await expect(
      parse(['{"tokens": [1], "arrival_ms": 5}', '{"tokens": [1], "arrival_ms": 4}']),
    ).rejects.toThrow(/t\.jsonl:2: arrival_ms 4 is earlier/);
    await expect(parse(['{"tokens": [1], "arrival_ms": 5}', '{"tokens": [1]}'])).rejects.toThrow(
      /t\.jsonl:2: "arrival_ms" must be on every line/,
    );
    await expect(parse(['{"tokens": [1], "entry": 4}'], { nodes: 4 })).rejects.toThrow(
      /entry 4 is not a node index/,
    );
    await expect(parse(['{"tokens": [1, 2, 3]}'], { limits: { maxTokens: 2 } })).rejects.toThrow(/tokens/);
    await expect(parse([""])).rejects.toThrow(/no requests/);
  });

  it("bounds line length while streaming, before buffering a whole hostile line", async () => {
    async function* chunks() {
      yield Buffer.from('{"tokens":[1]}\n');
      for (let i = 0; i < 100; i++) yield Buffer.from("x".repeat(1000));
    }
    const lines = boundedLines(chunks(), 10_000, "big.jsonl");
    await expect(parseTrace(lines, "big.jsonl")).rejects.toThrow(
      /big\.jsonl:2: line longer than 10000 bytes/,
    );
  });

  it("loads a file as a workload (CRLF lines too)", async () => {
    const f = join(tmp, "trace.jsonl");
    await writeFile(f, '{"tokens":[1,2]}\r\n{"tokens":[1,2]}\r\n{"prompt":"abc"}');
    const w = await loadTrace(f);
    expect(w.requests).toHaveLength(3);
    expect(w.arrival).toBe("closed-loop");
    expect(w.meta!.repeatedRequests).toBe(1);
    await expect(loadTrace(join(tmp, "absent.jsonl"))).rejects.toThrow(/cannot read trace/);
  });
});
