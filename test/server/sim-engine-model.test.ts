/** `--model` with `--engine sim` (which runs no model) is refused, not silently run as the cost profile. */
import { describe, expect, it } from "vitest";
import { engineSpec } from "../../src/server/runtime/engine-loader.js";
import { resolveNodeSettings, SettingsError } from "../../src/server/settings/index.js";

describe("--model with --engine sim", () => {
  it("is refused as a usage error naming the flag and its variable", () => {
    for (const [flags, env] of [
      [{ id: "A", engine: "sim", model: "/models/llama.gguf" }, {}],
      [{ id: "A", engine: "sim" }, { PREFIXMESH_MODEL: "qwen" }],
    ] as const) {
      const err = (() => {
        try {
          return engineSpec(resolveNodeSettings(flags, env));
        } catch (e) {
          return e;
        }
      })();
      expect(err).toBeInstanceOf(SettingsError);
      expect((err as Error).message).toMatch(
        /^--model needs --engine llamacpp or openai: .*PREFIXMESH_MODEL/,
      );
    }
  });

  it("leaves the default and the other engines alone", () => {
    expect(engineSpec(resolveNodeSettings({ id: "A", engine: "sim" }, {})).kind).toBe("sim");
    const openai = { id: "A", engine: "openai", model: "qwen", engineUrl: "http://127.0.0.1:1" };
    expect(engineSpec(resolveNodeSettings(openai, {}))).toMatchObject({ kind: "openai", model: "qwen" });
  });
});
