import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineAbortedError, EngineInputError } from "../../src/engines/errors.js";
import { GgmlType } from "../../src/engines/gguf/format.js";
import { ensureGeneratedModel } from "../../src/engines/gguf/generate.js";
import { GgufError, validateGguf } from "../../src/engines/gguf/validate.js";
import { buildSpmVocab } from "../../src/engines/gguf/vocab.js";
import { writeGguf } from "../../src/engines/gguf/writer.js";
import { LlamaCppEngine } from "../../src/engines/llamacpp/engine.js";
import { GPT2_VOCAB_ONLY, STORIES_260K, skipNote, TEST_MODEL_CACHE } from "./helpers.js";

const key = (t: Uint32Array) => Array.from(t).join(",");
const req = (id: string, tokens: Uint32Array, maxTokens = 4) => ({ id, tokens, maxTokens });

describe("llama.cpp engine on a generated model (tiny)", () => {
  let engine: LlamaCppEngine;
  beforeAll(async () => {
    engine = await LlamaCppEngine.create({
      modelPath: ensureGeneratedModel("tiny", TEST_MODEL_CACHE),
      slots: 2,
      slotContext: 512,
      maxSavedStates: 2,
      minSpillTokens: 8,
    });
  });
  afterAll(() => engine?.close());

  it("tokenizes with BOS, renders a chat prompt, and generates deterministically (greedy)", async () => {
    expect(engine.info).toMatchObject({ kind: "llamacpp", cacheMode: "engine-managed" });
    const prompt = await engine.applyChatTemplate([
      { role: "system", content: "Be brief." },
      { role: "user", content: "What is the capital of France?" },
    ]);
    expect(prompt).toBe("System: Be brief.\n\nUser: What is the capital of France?\nAssistant:");
    const tokens = await engine.tokenize(prompt);
    expect(tokens[0]).toBe(1);
    const a = await engine.run(req("a", tokens, 6));
    const b = await engine.run(req("b", tokens, 6));
    expect(a.completionTokens).toBeGreaterThan(0);
    expect(a.text).toBe(b.text);
    expect(a.promptTokens).toBe(tokens.length);
    expect(b.cachedTokens).toBe(tokens.length - 1); // full hit: last token re-evaluated for logits
  });

  it("applies presence and frequency penalties to greedy decoding, deterministically", async () => {
    for (const [text, penalty] of [
      ["a a a a a a a a", 2],
      ["The cat sat on the mat and the cat", -2],
    ] as const) {
      const tokens = await engine.tokenize(text);
      const plain = await engine.run(req("p0", tokens, 24));
      const penalised = { ...req("p1", tokens, 24), presencePenalty: penalty, frequencyPenalty: penalty };
      const a = await engine.run(penalised);
      const b = await engine.run({ ...penalised, id: "p2" });
      expect(a.text, text).toBe(b.text);
      expect(a.text, text).not.toBe(plain.text);
      // The next request without penalties is not penalised.
      expect((await engine.run(req("p3", tokens, 24))).text, text).toBe(plain.text);
    }
  });

  it("honours maxTokens and streams chunks that add up to the text", async () => {
    const tokens = await engine.tokenize("The quick brown fox");
    const chunks: string[] = [];
    const r = await engine.run(req("s", tokens, 5), (c) => chunks.push(c.text));
    expect(r.finishReason === "length" ? r.completionTokens : 5).toBe(5);
    expect(chunks.join("")).toBe(r.text);
  });

  it("cuts output at a stop string", async () => {
    const tokens = await engine.tokenize("Once upon a time");
    const free = await engine.run(req("f", tokens, 12));
    const stop = free.text.slice(2, 4);
    if (stop.length < 2) return; // output too short to pick a stop string (model-dependent)
    const r = await engine.run({ ...req("st", tokens, 12), stop: [stop] });
    expect(r.finishReason).toBe("stop");
    expect(r.text).toBe(free.text.slice(0, free.text.indexOf(stop)));
  });

  it("mirrors slots and saved states exactly, including evictions, and reuses saved states", async () => {
    const mk = (seed: number, len: number) =>
      Uint32Array.from({ length: len }, (_, i) => (i === 0 ? 1 : 300 + ((seed * 97 + i * 13) % 1500)));
    const prompts = [1, 2, 3, 4, 5].map((s) => mk(s, 40));
    for (const [i, p] of prompts.entries()) {
      const r = await engine.run(req(`e${i}`, p, 0));
      // engine-managed contract: the reported sequences are exactly the slots + saved states
      const mirror = new Set(r.cachedSequences!.map(key));
      const slotsAndStates = new Set(engine.cachedSequences().map(key));
      expect(mirror).toEqual(slotsAndStates);
      expect(mirror.has(key(p))).toBe(true);
    }
    // 2 slots hold the last two prompts; earlier ones spilled to ≤ 2 saved states (LRU evicted the rest)
    expect(engine.stateStats().states).toBeLessThanOrEqual(2);
    const seqs = new Set(engine.cachedSequences().map(key));
    expect(seqs.has(key(prompts[4]!))).toBe(true);
    expect(seqs.has(key(prompts[3]!))).toBe(true);
    expect(seqs.has(key(prompts[0]!))).toBe(false); // evicted from both levels
    expect(seqs.has(key(prompts[2]!))).toBe(true); // spilled to a saved state
    const again = await engine.run(req("again", prompts[2]!, 0));
    expect(again.cachedTokens).toBe(39); // loaded from the saved state, last token re-evaluated
    const cold = await engine.run(req("cold", prompts[0]!, 0));
    expect(cold.cachedTokens).toBe(1); // only the shared BOS survives anywhere
  });

  it("serializes concurrent runs (one at a time) and answers each", async () => {
    const prompts = ["alpha beta", "gamma delta", "alpha beta gamma"];
    const results = await Promise.all(
      prompts.map(async (p, i) => engine.run(req(`c${i}`, await engine.tokenize(p), 3))),
    );
    for (const [i, r] of results.entries()) {
      expect(r.promptTokens).toBe((await engine.tokenize(prompts[i]!)).length);
      expect(r.completionTokens).toBeGreaterThan(0);
    }
  });

  it("keeps distinct prompts in separate slots (they share only BOS), so alternating them always hits", async () => {
    const two = await LlamaCppEngine.create({
      modelPath: ensureGeneratedModel("tiny", TEST_MODEL_CACHE),
      slots: 2,
      slotContext: 256,
    });
    try {
      const a = await two.tokenize("Alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu");
      const b = await two.tokenize("One two three four five six seven eight nine ten eleven twelve");
      await two.run(req("a", a, 0));
      await two.run(req("b", b, 0));
      expect((await two.run(req("a2", a, 0))).cachedTokens).toBe(a.length - 1);
      expect((await two.run(req("b2", b, 0))).cachedTokens).toBe(b.length - 1);
      expect(two.stateStats().states).toBe(0); // nothing had to be spilled
    } finally {
      await two.close();
    }
  });

  it("removes saved-state directories orphaned by dead processes, and its own on close", async () => {
    const base = mkdtempSync(join(tmpdir(), "pm-states-"));
    const orphan = join(base, "prefixmesh-states-999999999-abc");
    const live = join(base, `prefixmesh-states-${process.pid}-xyz`);
    mkdirSync(orphan);
    mkdirSync(live);
    const e = await LlamaCppEngine.create({
      modelPath: ensureGeneratedModel("tiny", TEST_MODEL_CACHE),
      slots: 1,
      stateDir: base,
    });
    expect(existsSync(orphan)).toBe(false);
    expect(existsSync(live)).toBe(true); // owner (this process) is alive
    expect(readdirSync(base).length).toBe(2);
    await e.close();
    expect(readdirSync(base)).toEqual([`prefixmesh-states-${process.pid}-xyz`]);
    rmSync(base, { recursive: true, force: true });
  });

  it("rejects invalid requests with clear errors and honours abort", async () => {
    await expect(engine.run(req("empty", new Uint32Array(), 1))).rejects.toThrow(EngineInputError);
    await expect(engine.run(req("long", new Uint32Array(600).fill(5), 1))).rejects.toThrow(
      /exceeds the context/,
    );
    await expect(engine.run(req("vocab", Uint32Array.from([1, 999999]), 1))).rejects.toThrow(
      /outside the vocabulary/,
    );
    const ac = new AbortController();
    ac.abort();
    await expect(engine.run(req("ab", Uint32Array.from([1, 400]), 1), undefined, ac.signal)).rejects.toThrow(
      EngineAbortedError,
    );
    expect((await engine.health()).ok).toBe(true);
  });
});

describe("corrupt model files yield an error and a live process", () => {
  const dir = mkdtempSync(join(tmpdir(), "pm-corrupt-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("random bytes / truncated file / vocab-only GGUF are rejected before llama.cpp loads them", async () => {
    const rnd = join(dir, "random.gguf");
    writeFileSync(rnd, Buffer.alloc(1 << 16, 0x5a));
    await expect(LlamaCppEngine.create({ modelPath: rnd })).rejects.toThrow(GgufError);
    if (!skipNote(GPT2_VOCAB_ONLY)) {
      await expect(LlamaCppEngine.create({ modelPath: GPT2_VOCAB_ONLY })).rejects.toThrow(/no tensors/);
    }
    // passes the header checks but lacks tensors: llama.cpp itself refuses it, as an error
    const full = ensureGeneratedModel("tiny", TEST_MODEL_CACHE);
    const summary = validateGguf(full);
    expect(summary.tensorCount).toBeGreaterThan(1);
    const vocab = buildSpmVocab(2048);
    const partial = join(dir, "missing-tensors.gguf");
    writeGguf(
      partial,
      [
        ["general.architecture", { type: "string", value: "llama" }],
        ["llama.context_length", { type: "u32", value: 512 }],
        ["llama.embedding_length", { type: "u32", value: 64 }],
        ["llama.block_count", { type: "u32", value: 1 }],
        ["llama.feed_forward_length", { type: "u32", value: 128 }],
        ["llama.attention.head_count", { type: "u32", value: 4 }],
        ["llama.attention.layer_norm_rms_epsilon", { type: "f32", value: 1e-5 }],
        ["tokenizer.ggml.model", { type: "string", value: "llama" }],
        ["tokenizer.ggml.tokens", { type: "string[]", value: vocab.tokens }],
        ["tokenizer.ggml.scores", { type: "f32[]", value: vocab.scores }],
        ["tokenizer.ggml.token_type", { type: "i32[]", value: vocab.types }],
      ],
      [
        {
          name: "token_embd.weight",
          dims: [64, 2048],
          ggmlType: GgmlType.F32,
          data: function* () {
            yield new Uint8Array(64 * 2048 * 4);
          },
        },
      ],
    );
    await expect(LlamaCppEngine.create({ modelPath: partial })).rejects.toThrow(
      /could not load it.*missing tensor/,
    );
    // still alive: a good model loads and answers afterwards
    const ok = await LlamaCppEngine.create({
      modelPath: ensureGeneratedModel("tiny", TEST_MODEL_CACHE),
      slots: 1,
    });
    const r = await ok.run(req("alive", await ok.tokenize("hello"), 2));
    expect(r.completionTokens).toBeGreaterThan(0);
    await ok.close();
  });
});

describe("prefix reuse on a generated model (small)", () => {
  it("the second of two prompts sharing a 450-token prefix hits ≥ 450 tokens and prefills faster", async () => {
    const engine = await LlamaCppEngine.create({
      modelPath: ensureGeneratedModel("small", TEST_MODEL_CACHE),
      slots: 2,
      slotContext: 1024,
      threads: 1,
    });
    try {
      const prefix = (s: number) =>
        Array.from({ length: 450 }, (_, i) => (i === 0 ? 1 : 300 + ((s * 17 + i * 31) % 3000)));
      const tail = (s: number) => Array.from({ length: 90 }, (_, i) => 300 + ((s * 7 + i * 11) % 3000));
      const run = (id: string, p: number[]) => engine.run(req(id, Uint32Array.from(p), 1));
      const warmup = await run("w", [1, ...tail(9)]);
      expect(warmup.completionTokens).toBe(1);
      // Two prefixes, each cold then cached, summed; on a busy machine one round's wall-clock times can
      // still be noise, so up to three rounds (fresh prefixes each) and the best one decides.
      let best = Number.POSITIVE_INFINITY;
      for (let round = 0; round < 3 && best >= 0.6; round++) {
        const [p1, p2] = [prefix(1 + 2 * round), prefix(2 + 2 * round)];
        const coldA = await run(`a1-${round}`, [...p1, ...tail(1)]);
        const hitA = await run(`a2-${round}`, [...p1, ...tail(2)]);
        const coldB = await run(`b1-${round}`, [...p2, ...tail(1)]);
        const hitB = await run(`b2-${round}`, [...p2, ...tail(2)]);
        for (const cold of [coldA, coldB]) expect(cold.cachedTokens).toBeLessThan(10);
        for (const hit of [hitA, hitB]) expect(hit.cachedTokens).toBeGreaterThanOrEqual(450);
        const coldMs = coldA.prefillMs + coldB.prefillMs;
        const hitMs = hitA.prefillMs + hitB.prefillMs;
        best = Math.min(best, hitMs / coldMs);
        console.log(
          `small model, 540-token prompts: cold ${(coldMs / 2).toFixed(1)} ms, 450 cached ${(hitMs / 2).toFixed(1)} ms`,
        );
      }
      expect(best).toBeLessThan(0.6);
    } finally {
      await engine.close();
    }
  });
});

describe.skipIf(skipNote(STORIES_260K))("llama.cpp engine on stories260K (a real trained model)", () => {
  it("continues 'Once upon a time' coherently", async () => {
    const engine = await LlamaCppEngine.create({ modelPath: STORIES_260K, slots: 1, slotContext: 256 });
    try {
      const r = await engine.run(req("story", await engine.tokenize("Once upon a time"), 24));
      console.log(`stories260K: "Once upon a time${r.text}"`);
      expect(r.completionTokens).toBeGreaterThan(5);
      // a trained model writes English words, not noise
      expect(r.text).toMatch(/\b(there|was|a|the|little|girl|boy|named)\b/);
    } finally {
      await engine.close();
    }
  });
});
