import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GgmlType } from "../../src/engines/gguf/format.js";
import { ensureGeneratedModel, MODEL_PRESETS, parameterCount } from "../../src/engines/gguf/generate.js";
import { GgufError, validateGguf } from "../../src/engines/gguf/validate.js";
import { buildSpmVocab } from "../../src/engines/gguf/vocab.js";
import { writeGguf } from "../../src/engines/gguf/writer.js";
import { GPT2_VOCAB_ONLY, skipNote } from "./helpers.js";

const dir = mkdtempSync(join(tmpdir(), "pm-gguf-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sha = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");

describe("GGUF generator", () => {
  it("is deterministic, cached by parameters, and writes a valid llama GGUF v3", () => {
    const a = ensureGeneratedModel("tiny", join(dir, "a"));
    const b = ensureGeneratedModel("tiny", join(dir, "b"));
    expect(sha(a)).toBe(sha(b));
    expect(ensureGeneratedModel("tiny", join(dir, "a"))).toBe(a); // reused, not regenerated
    const other = ensureGeneratedModel({ ...MODEL_PRESETS.tiny, seed: 2 }, join(dir, "a"));
    expect(other).not.toBe(a);
    expect(sha(other)).not.toBe(sha(a));
    const s = validateGguf(a);
    expect(s.version).toBe(3);
    expect(s.architecture).toBe("llama");
    expect(s.tensorCount).toBe(3 + 9 * MODEL_PRESETS.tiny.layers);
    expect(s.metadata.get("llama.attention.layer_norm_rms_epsilon")).toBeCloseTo(1e-5);
    expect(s.arrayLengths.get("tokenizer.ggml.tokens")).toBe(MODEL_PRESETS.tiny.vocab);
  });

  it("sizes the bench preset like a ~57M-parameter model", () => {
    const n = parameterCount(MODEL_PRESETS.bench);
    expect(n).toBeGreaterThan(50e6);
    expect(n).toBeLessThan(65e6);
  });

  it("builds a prefix-closed vocabulary with all 256 byte tokens", () => {
    const v = buildSpmVocab(2048);
    expect(v.tokens.length).toBe(2048);
    expect(new Set(v.tokens).size).toBe(2048);
    expect(v.tokens[3 + 0x0a]).toBe("<0x0A>");
    expect(v.types.filter((t) => t === 6).length).toBe(256);
    const set = new Set(v.tokens);
    for (const t of v.tokens.slice(259)) {
      const chars = [...t];
      for (let n = 1; n < chars.length; n++) expect(set.has(chars.slice(0, n).join(""))).toBe(true);
    }
  });
});

describe("GGUF validation guards the process", () => {
  const expectReject = (path: string, pattern: RegExp) => {
    expect(() => validateGguf(path)).toThrow(GgufError);
    expect(() => validateGguf(path)).toThrow(pattern);
  };

  it("rejects random bytes, a missing file and an empty file", () => {
    const rnd = join(dir, "random.gguf");
    writeFileSync(rnd, Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 131 + 7) % 256)));
    expectReject(rnd, /bad magic/);
    expectReject(join(dir, "nope.gguf"), /cannot open/);
    const empty = join(dir, "empty.gguf");
    writeFileSync(empty, "");
    expectReject(empty, /too small/);
  });

  it("rejects a truncated model, both in the header and in the tensor data", () => {
    const full = readFileSync(ensureGeneratedModel("tiny", join(dir, "a")));
    const cutData = join(dir, "cut-data.gguf");
    writeFileSync(cutData, full.subarray(0, full.length - 1000));
    expectReject(cutData, /truncated: tensor data/);
    const cutHead = join(dir, "cut-head.gguf");
    writeFileSync(cutHead, full.subarray(0, 5000));
    expectReject(cutHead, /truncated header/);
  });

  it("rejects a llama tokenizer without byte tokens (llama.cpp would abort the process)", () => {
    const p = join(dir, "nobytes.gguf");
    writeGguf(
      p,
      [
        ["general.architecture", { type: "string", value: "llama" }],
        ["tokenizer.ggml.model", { type: "string", value: "llama" }],
        ["tokenizer.ggml.tokens", { type: "string[]", value: ["<unk>", "a", "b"] }],
      ],
      [
        {
          name: "x",
          dims: [32],
          ggmlType: GgmlType.F32,
          data: function* () {
            yield new Uint8Array(128);
          },
        },
      ],
    );
    expectReject(p, /lacks byte token <0x00>/);
  });

  it.skipIf(skipNote(GPT2_VOCAB_ONLY))("rejects a vocab-only GGUF", () => {
    expectReject(GPT2_VOCAB_ONLY, /no tensors/);
  });
});
