/**
 * An engine's own settings given to another engine (the manifest's PREFIXMESH_THREADS and
 * PREFIXMESH_SLOT_CONTEXT left in place when a pod is switched to --engine openai) are said at start,
 * naming flag and variable, rather than accepted without a word as if they tuned something.
 */
import { describe, expect, it } from "vitest";
import { loadEngine, unusedEngineSettings } from "../../src/server/runtime/engine-loader.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

describe("settings the chosen engine does not use", () => {
  it("lists the embedded engine's with a remote or simulated one, and the simulator's elsewhere", () => {
    const openai = { engine: "openai" as const, model: "m", engineUrl: "http://127.0.0.1:1" };
    expect(unusedEngineSettings({ ...openai, threads: 2, slotContext: 4096 })).toEqual([
      "threads",
      "slotContext",
    ]);
    expect(unusedEngineSettings({ engine: "llamacpp", model: "generated", simTimeScale: 0.1 })).toEqual([
      "simTimeScale",
    ]);
    expect(unusedEngineSettings({ engine: "llamacpp", model: "generated", threads: 2, slots: 4 })).toEqual(
      [],
    );
    expect(unusedEngineSettings({ engine: "sim", model: "generated", simProfile: "cpu-llamacpp" })).toEqual(
      [],
    );
  });

  it("names none for a node given no engine setting (a default is not a setting given)", () => {
    for (const engine of ["llamacpp", "openai"]) {
      const s = resolveNodeSettings({ id: "A", engine, model: "m", engineUrl: "http://127.0.0.1:1" }, {});
      expect(unusedEngineSettings(s), engine).toEqual([]);
    }
  });

  it("are logged when the engine loads, with their flag and variable", async () => {
    const said: { msg: string; fields: Record<string, unknown> }[] = [];
    const engine = await loadEngine({ engine: "sim", model: "generated", threads: 4 }, (msg, fields) =>
      said.push({ msg, fields }),
    );
    try {
      expect(said).toHaveLength(1);
      expect(said[0]?.msg).toBe("--threads is not used by --engine sim: ignored");
      expect(said[0]?.fields).toMatchObject({ variable: "PREFIXMESH_THREADS" });
    } finally {
      await engine.close?.();
    }
  });
});
