/**
 * Tenants never share the embedded llama.cpp engine's cache (stories260K): llama.cpp compares tokens
 * only, so the engine tags slots and saved states with the namespace that computed them. Two tenants
 * with the same prompt, on one slot: each gets cached tokens only from its own earlier requests,
 * whether from the slot or from a saved state, and the node is told each namespace's content as its
 * cache key.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineRequest } from "../../src/core/engine.js";
import { keyTokens } from "../../src/core/namespace.js";
import { LlamaCppEngine } from "../../src/engines/llamacpp/engine.js";
import { STORIES_260K, skipNote } from "./helpers.js";

const skip = skipNote(STORIES_260K);

/** BOS, then ids in the model's vocabulary (512). */
const prompt = (seed: number, n = 48) =>
  Uint32Array.from({ length: n }, (_, i) => (i === 0 ? 1 : 3 + ((seed * 97 + i * 13) % 500)));
let seq = 0;
const req = (tokens: Uint32Array, cacheSalt?: string): EngineRequest => ({
  id: `t${++seq}`,
  tokens,
  maxTokens: 0,
  ...(cacheSalt !== undefined ? { cacheSalt } : {}),
});
const same = (a: Uint32Array, b: Uint32Array) => a.length === b.length && a.every((x, i) => x === b[i]);

describe.skipIf(skip)("tenants on the embedded llama.cpp engine (one slot, saved states)", () => {
  let engine: LlamaCppEngine;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "pm-tenants-"));
    engine = await LlamaCppEngine.create(
      {
        modelPath: STORIES_260K,
        slots: 1,
        slotContext: 256,
        maxSavedStates: 4,
        minSpillTokens: 8,
        stateDir: dir,
      },
      { log: () => {} },
    );
  });
  afterAll(async () => {
    await engine?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("gives each tenant cached tokens only from its own earlier requests", async () => {
    const p = prompt(1);
    const cached = async (salt?: string) => (await engine.run(req(p, salt))).cachedTokens;
    expect(await cached("tenant-a")).toBe(0);
    expect(await cached("tenant-a")).toBe(p.length - 1);
    // Tenant B, the same prompt, on the one slot holding A's: nothing reused (A's goes to a state).
    expect(await cached("tenant-b")).toBe(0);
    expect(await cached("tenant-b")).toBe(p.length - 1);
    // A again: its own saved state, not B's slot.
    expect(await cached("tenant-a")).toBe(p.length - 1);
    expect(engine.stateStats().loads).toBeGreaterThan(0);
    // The default namespace shares nothing with either tenant.
    expect(await cached()).toBe(0);
    expect(await cached()).toBe(p.length - 1);
    // The node's tree is told each namespace's content as its cache key, each apart.
    const seqs = engine.cachedSequences();
    for (const key of [
      keyTokens({ cacheSalt: "tenant-a", tokens: p }),
      keyTokens({ cacheSalt: "tenant-b", tokens: p }),
      p,
    ])
      expect(seqs.some((s) => same(s.subarray(0, key.length - 1), key.subarray(0, key.length - 1)))).toBe(
        true,
      );
    expect(seqs).toHaveLength(3);
  }, 120_000);
});
