import { afterAll, describe, expect, it } from "vitest";
import type { Engine } from "../../src/core/engine.js";
import { createEngine } from "../../src/engines/factory.js";
import { ensureGeneratedModel, MODEL_PRESETS } from "../../src/engines/gguf/generate.js";
import { TEST_MODEL_CACHE } from "./helpers.js";

const open: Engine[] = [];
afterAll(async () => {
  for (const e of open) await e.close();
});

const CHATML =
  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

describe("createEngine", () => {
  it("builds a llamacpp engine from a generated model spec", async () => {
    const e = await createEngine({
      kind: "llamacpp",
      model: "generated:tiny",
      cacheDir: TEST_MODEL_CACHE,
      slots: 1,
    });
    open.push(e);
    expect(e.info).toMatchObject({ kind: "llamacpp", model: "generated-tiny", cacheMode: "engine-managed" });
    const r = await e.run({ id: "1", tokens: await e.tokenize("hi there"), maxTokens: 2 });
    expect(r.completionTokens).toBe(2);
  });

  it("renders a GGUF's own chat template, and that text is what gets tokenized", async () => {
    const path = ensureGeneratedModel({ ...MODEL_PRESETS.tiny, chatTemplate: CHATML }, TEST_MODEL_CACHE);
    const e = await createEngine({ kind: "llamacpp", model: path, slots: 1 });
    open.push(e);
    const text = await e.applyChatTemplate([{ role: "user", content: "hi" }]);
    expect(text).toContain("<|im_start|>user\nhi<|im_end|>");
    expect(text.endsWith("<|im_start|>assistant\n")).toBe(true);
    expect((await e.tokenize(text)).length).toBeGreaterThan(5);
  });

  it("builds the remote and simulated engines", async () => {
    const remote = await createEngine({ kind: "openai", baseUrl: "http://127.0.0.1:9", model: "m" });
    open.push(remote);
    expect(remote.info).toMatchObject({ kind: "openai", cacheMode: "node-managed" });
    const sim = await createEngine({ kind: "sim" });
    open.push(sim);
    expect(sim.info.kind).toBe("sim");
  });

  it("rejects bad specs clearly", async () => {
    await expect(createEngine({ kind: "llamacpp", model: "generated:huge" })).rejects.toThrow(
      /unknown generated model 'huge'/,
    );
    await expect(createEngine({ kind: "openai", baseUrl: "not a url", model: "m" })).rejects.toThrow(
      /Invalid URL/,
    );
    await expect(createEngine({ kind: "sim", profile: "nope" })).rejects.toThrow(/unknown cost profile/);
    await expect(createEngine({ kind: "llamacpp", model: "/nonexistent.gguf" })).rejects.toThrow(
      /cannot open/,
    );
  });
});
