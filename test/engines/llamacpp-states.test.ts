/**
 * The llama.cpp engine's second cache level (saved states): loads that used to fail requests,
 * fallback when a state cannot be loaded, cache reset, and the sweep of orphaned state directories.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  truncateSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ensureGeneratedModel } from "../../src/engines/gguf/generate.js";
import {
  LlamaCppEngine,
  ORPHAN_STATE_DIR_AGE_MS,
  removeOrphanStateDirs,
} from "../../src/engines/llamacpp/engine.js";
import type { LlamaCppOptions } from "../../src/engines/llamacpp/options.js";
import { StateCache } from "../../src/engines/llamacpp/state-cache.js";
import { TEST_MODEL_CACHE } from "./helpers.js";

const key = (t: Uint32Array) => Array.from(t).join(",");
/** MMLU-shaped: BOS, a 40-token "few-shot prefix" per family, a 10-token "question" per item. */
const prompt = (family: number, item: number) =>
  Uint32Array.from([
    1,
    ...Array.from({ length: 40 }, (_, i) => 300 + ((family * 97 + i * 13) % 1400)),
    ...Array.from({ length: 10 }, (_, i) => 1750 + ((item * 31 + i * 7) % 250)),
  ]);

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), "pm-states-test-"));
  dirs.push(d);
  return d;
}

/** One slot and two saved states: every new family spills the slot, so states get saved and reloaded. */
async function smallCacheEngine(extra: Partial<LlamaCppOptions> = {}, logs: string[] = []) {
  const stateDir = tempDir();
  const engine = await LlamaCppEngine.create(
    {
      modelPath: ensureGeneratedModel("tiny", TEST_MODEL_CACHE),
      slots: 1,
      slotContext: 256,
      maxSavedStates: 2,
      minSpillTokens: 8,
      stateDir,
      ...extra,
    },
    { log: (msg) => logs.push(msg) },
  );
  const stateFiles = () =>
    readdirSync(stateDir).flatMap((d) => readdirSync(join(stateDir, d)).map((f) => join(stateDir, d, f)));
  return { engine, stateFiles };
}

describe("saved states on a generated model (tiny)", () => {
  it("loads a state even when the spill before it fills the state cache (was: 'Failed to load state from file')", async () => {
    const logs: string[] = [];
    const { engine } = await smallCacheEngine({}, logs);
    try {
      await engine.run({ id: "a1", tokens: prompt(1, 1), maxTokens: 0 });
      await engine.run({ id: "b1", tokens: prompt(2, 1), maxTokens: 0 }); // saves a1
      await engine.run({ id: "c1", tokens: prompt(3, 1), maxTokens: 0 }); // saves b1: cache full, a1 is LRU
      // a2 loads a1's state; the slot (c1) is spilled first. That spill evicted the LRU state — the
      // one being loaded — and deleted its file before loadStateFromFile read it.
      const a2 = await engine.run({ id: "a2", tokens: prompt(1, 2), maxTokens: 0 });
      expect(a2.cachedTokens).toBe(41); // BOS + the family prefix came from the saved state
      expect(engine.stateStats()).toMatchObject({ loads: 1, loadFailures: 0, states: 2 });
      expect(logs).toEqual([]);
      // the mirror: slot = a2, states = a1 (loaded, kept) + c1 (spilled); b1 was the LRU unprotected one
      expect(new Set(a2.cachedSequences!.map(key))).toEqual(
        new Set([prompt(1, 2), prompt(1, 1), prompt(3, 1)].map(key)),
      );
    } finally {
      await engine.close();
    }
  });

  it("a state file that cannot be loaded (deleted / truncated) is dropped, counted, logged, and the prompt recomputed", async () => {
    const reference = await smallCacheEngine();
    const expected = await reference.engine.run({ id: "ref", tokens: prompt(1, 2), maxTokens: 6 });
    await reference.engine.close();

    for (const damage of ["delete", "truncate"] as const) {
      const logs: string[] = [];
      const { engine, stateFiles } = await smallCacheEngine({}, logs);
      try {
        await engine.run({ id: "a1", tokens: prompt(1, 1), maxTokens: 0 });
        await engine.run({ id: "b1", tokens: prompt(2, 1), maxTokens: 0 }); // saves a1
        const [file] = stateFiles();
        expect(file).toBeDefined();
        if (damage === "delete") rmSync(file!);
        else truncateSync(file!, 1000);
        const r = await engine.run({ id: "a2", tokens: prompt(1, 2), maxTokens: 6 });
        expect(r.cachedTokens).toBe(0);
        // the slot was emptied before the load: output equals a cold engine's, no stale KV cells
        expect(r.text).toBe(expected.text);
        expect(engine.stateStats()).toMatchObject({ loads: 0, loadFailures: 1 });
        expect(logs).toEqual(["saved state failed to load; recomputing the prompt"]);
        expect(r.cachedSequences!.map(key)).not.toContain(key(prompt(1, 1)));
        expect((await engine.health()).ok).toBe(true);
      } finally {
        await engine.close();
      }
    }
  });

  it("resetCache empties slots and saved states, after queued runs, and the engine keeps serving", async () => {
    const { engine, stateFiles } = await smallCacheEngine({ slots: 2 });
    try {
      for (const f of [1, 2, 3, 4]) await engine.run({ id: `p${f}`, tokens: prompt(f, 1), maxTokens: 0 });
      expect(engine.stateStats().states).toBeGreaterThan(0);
      // queued behind a running request: the run completes with its own results first
      const running = engine.run({ id: "q", tokens: prompt(1, 1), maxTokens: 2 });
      const reset = engine.resetCache();
      expect((await running).cachedTokens).toBe(50);
      await reset;
      expect(engine.cachedSequences()).toEqual([]);
      expect(engine.stateStats().states).toBe(0);
      expect(stateFiles()).toEqual([]);
      const cold = await engine.run({ id: "cold", tokens: prompt(1, 1), maxTokens: 0 });
      expect(cold.cachedTokens).toBe(0);
      expect(cold.cachedSequences!.map(key)).toEqual([key(prompt(1, 1))]);
    } finally {
      await engine.close();
    }
    await expect(engine.resetCache()).rejects.toThrow(/closed/);
  });
});

describe("state cache bookkeeping (no llama.cpp)", () => {
  const save = (file: string) => async () => writeFileSync(file, Buffer.alloc(100));
  const toks = (...t: number[]) => Uint32Array.from(t);

  it("never evicts the protected state; with no other room it saves nothing; a failed save leaves no file", async () => {
    const dir = tempDir();
    const cache = new StateCache(dir, { maxStates: 2, maxBytes: 1e9 });
    const a = (await cache.add(toks(1, 2), (f) => save(f)()))!;
    await cache.add(toks(3, 4), (f) => save(f)());
    // a is the LRU, but it is the one about to be loaded
    await cache.add(toks(5, 6), (f) => save(f)(), a);
    expect(cache.entries.map((s) => key(s.tokens))).toEqual(["1,2", "5,6"]);
    expect(existsSync(a.file)).toBe(true);

    const one = new StateCache(tempDir(), { maxStates: 1, maxBytes: 1e9 });
    const only = (await one.add(toks(1), (f) => save(f)()))!;
    let called = false;
    const skipped = await one.add(
      toks(2),
      async () => {
        called = true;
      },
      only,
    );
    expect(skipped).toBeUndefined();
    expect(called).toBe(false);
    expect(one.entries).toEqual([only]);

    const failing = new StateCache(tempDir(), { maxStates: 2, maxBytes: 1e9 });
    await expect(
      failing.add(toks(9), async (f) => {
        writeFileSync(f, "partial");
        throw new Error("disk full");
      }),
    ).rejects.toThrow("disk full");
    expect(readdirSync(failing.dir)).toEqual([]);
    expect(failing.entries).toEqual([]);
  });
});

describe("startup sweep of orphaned state directories", () => {
  it("removes dead-pid directories and pid-less ones untouched for an hour; keeps live and recent ones", () => {
    const base = tempDir();
    const now = Date.now();
    const old = (now - ORPHAN_STATE_DIR_AGE_MS - 60_000) / 1000;
    const make = (name: string, mtimeSec?: number) => {
      const d = join(base, name);
      mkdirSync(d);
      writeFileSync(join(d, "state-1.bin"), "x");
      if (mtimeSec !== undefined) utimesSync(d, mtimeSec, mtimeSec);
      return d;
    };
    make("prefixmesh-states-999999999-dead");
    make(`prefixmesh-states-${process.pid}-live`, old); // owner alive: kept however old
    make("prefixmesh-states-OldNoPid", old);
    make("prefixmesh-states-NewNoPid");
    make("unrelated-dir", old);
    removeOrphanStateDirs(base, now);
    expect(readdirSync(base).sort()).toEqual(
      ["prefixmesh-states-NewNoPid", `prefixmesh-states-${process.pid}-live`, "unrelated-dir"].sort(),
    );
    removeOrphanStateDirs(join(base, "missing")); // an absent base is not an error
  });
});
