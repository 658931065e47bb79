/**
 * The llama.cpp server's cache model (src/engines/llama-slots), rule by rule as the server's source
 * states them (tools/server/server-context.cpp, server-task.cpp). The real server is checked against
 * the model in llama-slots-real.test.ts.
 */
import { describe, expect, it } from "vitest";
import { PromptCacheModel } from "../../src/engines/llama-slots/prompt-cache.js";
import { SlotMirror } from "../../src/engines/llama-slots/slot-mirror.js";
import { UNKNOWN_TOKEN } from "../../src/engines/llama-slots/tokens.js";
import { cat, range, SLOT_SERVER } from "./slot-fixtures.js";

const t = (...xs: number[]) => Uint32Array.from(xs);

describe("the slot mirror", () => {
  it("reports the common prefix, one less when the prompt is all cached", () => {
    const m = new SlotMirror({ ...SLOT_SERVER, cacheRamMiB: 0 });
    const p = range(1, 10);
    expect(m.launch(0, p, [0, 1])).toBe(0);
    m.finish(0, p, t(100, 101), 11); // the last generated token is never evaluated
    expect(m.predict(0, p)).toBe(9);
    expect(m.predict(0, cat(p, t(100, 7)))).toBe(11);
    expect(m.predict(0, cat(range(1, 5), t(99)))).toBe(5);
    expect(m.predict(1, p)).toBe(0);
  });

  it("chooses the slot with the most cached tokens, then the least recently used", () => {
    const m = new SlotMirror({ ...SLOT_SERVER, cacheRamMiB: 0 });
    const a = range(1, 20);
    const b = range(500, 20);
    m.launch(0, a, [0, 1]);
    m.finish(0, a, [], 20);
    m.launch(1, b, [1]);
    m.finish(1, b, [], 20);
    expect(m.choose(cat(range(1, 10), t(7)), [0, 1])).toEqual({ slot: 0, predicted: 10 });
    expect(m.choose(cat(range(500, 15), t(7)), [0, 1])).toEqual({ slot: 1, predicted: 15 });
    // Nothing in common: the slot used longest ago.
    expect(m.choose(range(9000, 5), [0, 1]).slot).toBe(0);
    expect(m.choose(range(9000, 5), [1]).slot).toBe(1);
  });

  it("saves a slot it is about to lose most of to the RAM cache, and restores the best prompt", () => {
    const m = new SlotMirror(SLOT_SERVER);
    const shared = range(1, 100);
    const a = cat(shared, range(1000, 20));
    const b = range(5000, 120);
    m.launch(0, a, [0, 1]);
    m.finish(0, a, [], 120);
    // b on slot 0: nothing in common (share ≤ 0.1) → the slot's prompt a is saved first.
    expect(m.launch(0, b, [0, 1])).toBe(0);
    m.finish(0, b, [], 120);
    expect(m.stats().cachedPrompts).toBe(1);
    // A prompt sharing a's first 100 tokens restores a from RAM into the slot.
    const a2 = cat(shared, range(2000, 20));
    expect(m.predict(0, a2, [0, 1])).toBe(100);
    expect(m.launch(0, a2, [0, 1])).toBe(100);
    // a left the RAM cache (restored), b went in (saved before the load).
    expect(
      m
        .sequences()
        .map((s) => s.length)
        .sort(),
    ).toEqual([120, 120]);
  });

  it("keeps the slot when it keeps at least half of it (no RAM round trip)", () => {
    const m = new SlotMirror(SLOT_SERVER);
    const a = range(1, 100);
    m.launch(0, a, [0]);
    m.finish(0, a, [], 100);
    const a2 = cat(range(1, 60), range(700, 10));
    expect(m.launch(0, a2, [0])).toBe(60);
    expect(m.stats().cachedPrompts).toBe(0);
  });

  it("never restores a cached prompt it would keep less than a quarter of", () => {
    const c = new PromptCacheModel({ ramMiB: 8192, totalContextTokens: 4096 });
    c.save(range(1, 100));
    expect(c.load(new Uint32Array(0), cat(range(1, 24), t(0)))).toBeUndefined();
    expect(c.load(new Uint32Array(0), cat(range(1, 25), t(0)))?.length).toBe(100);
    expect(c.states).toHaveLength(0);
  });

  it("drops cached prompts the new one contains, and skips one already contained", () => {
    const c = new PromptCacheModel({ ramMiB: 8192, totalContextTokens: 4096 });
    c.save(range(1, 10));
    c.save(range(1, 20));
    expect(c.states.map((s) => s.tokens.length)).toEqual([20]);
    c.save(range(1, 15));
    expect(c.states.map((s) => s.tokens.length)).toEqual([20]);
  });

  it("evicts the oldest prompts beyond the token limit (no byte limit: the total context)", () => {
    const c = new PromptCacheModel({ ramMiB: -1, totalContextTokens: 100 });
    c.save(range(0, 60));
    c.save(range(1000, 30));
    c.update();
    expect(c.states).toHaveLength(2);
    c.save(range(2000, 30));
    c.update();
    expect(c.states.map((s) => s.tokens[0])).toEqual([1000, 2000]);
  });

  it("saves idle slots to the RAM cache when another slot starts, and clears them with a unified KV", () => {
    const unified = new SlotMirror({ ...SLOT_SERVER, kvUnified: true });
    const a = range(1, 50);
    unified.launch(0, a, [0, 1]);
    unified.finish(0, a, [], 50);
    unified.launch(1, range(900, 10), [0, 1]);
    expect(unified.stats().slotTokens).toEqual([0, 10]);
    expect(unified.stats().cachedPrompts).toBe(1);
    // Slot 0 was cleared: an empty slot's kept share is NaN, so nothing is restored into it.
    expect(unified.predict(0, a, [0])).toBe(0);
  });

  it("never matches through tokens it does not know, and resyncs slot lengths", () => {
    const m = new SlotMirror({ ...SLOT_SERVER, cacheRamMiB: 0 });
    const p = range(1, 10);
    m.launch(0, p, [0, 1]);
    m.finish(0, p, [], 13);
    expect(m.predict(0, cat(p, t(UNKNOWN_TOKEN, 3)))).toBe(10);
    expect(m.sequences()).toEqual([p]);
    m.resync([5, undefined]);
    expect(m.predict(0, p)).toBe(5);
    m.clear();
    expect(m.sequences()).toEqual([]);
  });

  it("undoes a start the server never got (slots and RAM cache as they were)", () => {
    const m = new SlotMirror(SLOT_SERVER);
    const a = range(1, 40);
    m.launch(0, a, [0, 1]);
    m.finish(0, a, [], 40);
    const before = m.save();
    m.launch(0, range(900, 40), [0, 1]); // saves a to the RAM cache, overwrites the slot
    expect(m.stats().cachedPrompts).toBe(1);
    m.undo(before);
    expect(m.stats()).toMatchObject({ slotTokens: [40, 0], cachedPrompts: 0 });
    expect(m.predict(0, a)).toBe(39);
  });
});
