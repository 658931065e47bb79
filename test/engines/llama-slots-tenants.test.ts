/**
 * Tenants on llama.cpp's server, in the slot mirror (src/engines/llama-slots): the server compares
 * tokens only, so the mirror tags each slot and RAM-cache prompt with the namespace that computed it
 * and lets a request reuse only its own namespace's content. The real server: llama-server-tenants.test.ts.
 */
import { describe, expect, it } from "vitest";
import { keyTokens, NAMESPACE_TOKENS } from "../../src/core/namespace.js";
import { SavedSlots } from "../../src/engines/llama-slots/saved-slots.js";
import { SlotMirror } from "../../src/engines/llama-slots/slot-mirror.js";
import { DEFAULT_NAMESPACE } from "../../src/engines/namespace-tags.js";
import { cat, range, SLOT_SERVER } from "./slot-fixtures.js";

const A = { cacheSalt: "tenant-a" };
const B = { cacheSalt: "tenant-b" };

describe("the slot mirror with tenants", () => {
  it("reuses a slot's content for its own namespace only, and the slot becomes the new one's", () => {
    const m = new SlotMirror({ ...SLOT_SERVER, cacheRamMiB: 0 });
    const p = range(1, 40);
    m.launch(0, p, [0, 1], A);
    m.finish(0, p, [], 40);
    expect(m.predict(0, p, [0, 1], undefined, A)).toBe(39);
    expect(m.predict(0, p, [0, 1], undefined, B)).toBe(0);
    expect(m.predict(0, p, [0, 1])).toBe(0);
    expect(m.reuses(0, p, [0, 1], B)).toBe(false);
    // B must run there: sent without cache_prompt, nothing reused; the slot is B's now.
    expect(m.launch(0, p, [0], B, m.reuses(0, p, [0], B))).toBe(0);
    m.finish(0, p, [], 40);
    expect(m.slotNamespace(0)).toEqual(B);
    expect(m.reuses(0, p, [0, 1], B)).toBe(true);
    expect(m.predict(0, p, [0, 1], undefined, B)).toBe(39);
    expect(m.predict(0, p, [0, 1], undefined, A)).toBe(0);
  });

  it("chooses the slot holding the request's own namespace, not another's longer match", () => {
    const m = new SlotMirror({ ...SLOT_SERVER, cacheRamMiB: 0 });
    const shared = range(1, 30);
    const a = cat(shared, range(100, 10));
    const b = cat(range(1, 10), range(500, 30));
    m.launch(0, a, [0, 1], A);
    m.finish(0, a, [], a.length);
    m.launch(1, b, [1], B);
    m.finish(1, b, [], b.length);
    const prompt = cat(shared, range(900, 10));
    expect(m.choose(prompt, [0, 1], B)).toEqual({ slot: 1, predicted: 10 });
    expect(m.choose(prompt, [0, 1], A)).toEqual({ slot: 0, predicted: 30 });
  });

  it("tags the RAM prompt cache: a prompt restored from another namespace is not reused", () => {
    const m = new SlotMirror(SLOT_SERVER);
    const a = range(1, 100);
    const other = range(5000, 100);
    m.launch(0, a, [0, 1], A);
    m.finish(0, a, [], 100);
    // Another prompt on slot 0 sends a to the RAM cache (tagged A).
    m.launch(0, other, [0, 1], A);
    m.finish(0, other, [], 100);
    expect(m.stats().cachedPrompts).toBe(1);
    // B's request for a's prefix: the server restores a into the slot, but it is A's content.
    const b = cat(range(1, 80), range(9000, 10));
    expect(m.reuses(0, b, [0, 1], B)).toBe(false);
    expect(m.reuses(0, b, [0, 1], A)).toBe(true);
    expect(m.predict(0, b, [0, 1], undefined, B)).toBe(0);
    expect(m.predict(0, b, [0, 1], undefined, A)).toBe(80);
    // Guarded (the RAM cache holds prompts nobody knows): no reuse whenever the cache is touched.
    expect(m.reuses(0, b, [0, 1], A, true)).toBe(false);
    const own = cat(range(5000, 90), range(7000, 5));
    expect(m.reuses(0, own, [0, 1], A, true)).toBe(true);
  });

  it("reuses only when the slot is its own whether or not a run going on elsewhere is saved first", () => {
    const m = new SlotMirror(SLOT_SERVER);
    const q = range(1, 100);
    const x = range(5000, 100);
    m.launch(0, x, [0, 1], B);
    m.finish(0, x, [], 100);
    // A's run of q is going on in slot 1 (not idle: not in the RAM cache as far as the mirror knows).
    m.launch(1, q, [1], A);
    m.finish(1, q, [], 100);
    const prompt = cat(range(1, 90), range(9000, 10));
    // If slot 1's run ends at the server before B's starts, q (A's) is saved and restored into slot 0.
    expect(m.reuses(0, prompt, [0], B)).toBe(true);
    expect(m.reuses(0, prompt, [0], B, false, [1])).toBe(false);
    // Nor A: without that save, slot 0 still holds B's content.
    expect(m.reuses(0, prompt, [0], A, false, [1])).toBe(false);
  });

  it("reports each namespace's content as its cache key, apart from the default namespace's", () => {
    const m = new SlotMirror({ ...SLOT_SERVER, cacheRamMiB: 0 });
    const p = range(1, 20);
    m.launch(0, p, [0, 1], A);
    m.finish(0, p, [], 20);
    m.launch(1, p, [1]);
    m.finish(1, p, [], 20);
    const seqs = m.sequences();
    expect(seqs).toHaveLength(2);
    expect(seqs[0]).toEqual(keyTokens({ ...A, tokens: p }));
    expect(seqs[0]!.length).toBe(NAMESPACE_TOKENS + 20);
    expect(seqs[1]).toEqual(p);
  });

  it("undoes a start together with the slot's namespace", () => {
    const m = new SlotMirror({ ...SLOT_SERVER, cacheRamMiB: 0 });
    const p = range(1, 20);
    m.launch(0, p, [0, 1], A);
    m.finish(0, p, [], 20);
    const before = m.save();
    m.launch(0, p, [0, 1], B, false);
    expect(m.slotNamespace(0)).toEqual(B);
    m.undo(before);
    expect(m.slotNamespace(0)).toEqual(A);
  });
});

describe("saved slot states with tenants", () => {
  it("restores a state for its own namespace only, and keeps equal tokens of two namespaces apart", () => {
    const s = new SavedSlots(4, "t");
    const p = range(1, 50);
    s.saved(s.nextFile(), p, A);
    expect(s.best(p, A)?.length).toBe(50);
    expect(s.best(p, B)).toBeUndefined();
    expect(s.best(p)).toBeUndefined();
    expect(s.covers(p, B)).toBe(false);
    s.saved(s.nextFile(), p, B);
    expect(s.entries).toHaveLength(2);
    s.saved(s.nextFile(), p, DEFAULT_NAMESPACE);
    expect(
      s
        .sequences()
        .map((q) => q.length)
        .sort(),
    ).toEqual([50, 50 + NAMESPACE_TOKENS, 50 + NAMESPACE_TOKENS]);
  });
});
