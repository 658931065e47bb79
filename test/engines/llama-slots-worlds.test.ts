/**
 * The slot mirror's worlds (src/engines/llama-slots/worlds.ts): a run's end can reach the node after
 * the start of another run that the server began once the first had ended (two responses, two server
 * threads). The server then saved the ended slot to its RAM cache at that start; the node, going by
 * arrival order, thought it still busy. The case below is the one a loaded machine produced against
 * the real llama-server: the saved prompt, which the node never mirrored, was later restored for
 * another tenant.
 */
import { describe, expect, it } from "vitest";
import { SlotMirror } from "../../src/engines/llama-slots/slot-mirror.js";
import { MAX_WORLDS, MirrorWorlds } from "../../src/engines/llama-slots/worlds.js";
import { cat, range, SLOT_SERVER } from "./slot-fixtures.js";

const A = { cacheSalt: "tenant-a" };
const B = { cacheSalt: "tenant-b" };

/**
 * B's q runs on slot 1; A's s starts on slot 0 while q runs; q's end comes in after s began (the
 * likelier order: q ended after s's start); s ends; B's r takes slot 1 keeping most of q (no RAM-cache
 * update then), so had q not been saved at s's start, it would be in no cache at all.
 */
function overtaken(): { worlds: MirrorWorlds; q: Uint32Array } {
  const worlds = new MirrorWorlds(new SlotMirror(SLOT_SERVER));
  const q = range(1, 100);
  const s = range(5000, 100);
  const r = cat(range(1, 60), range(7000, 40));
  worlds.launch(1, (m) => m.launch(1, q, [0, 1], B));
  worlds.launch(0, (m) => m.launch(0, s, [0], A));
  worlds.each((m) => m.finish(1, q, [], 100));
  expect(worlds.report(1, 0)).toBe(true);
  worlds.fork((m) => m.idleSaved(1), false);
  worlds.each((m) => m.finish(0, s, [], 100));
  expect(worlds.report(0, 0)).toBe(true);
  worlds.launch(1, (m) => m.launch(1, r, [1, 0], B));
  worlds.each((m) => m.finish(1, r, [], 100));
  expect(worlds.report(1, 60)).toBe(true);
  return { worlds, q };
}

describe("the slot mirror's worlds", () => {
  it("keeps both orders of an end and a start it saw arrive out of order", () => {
    const { worlds } = overtaken();
    expect(worlds.size).toBe(2);
    const [likely, other] = worlds.mirrors();
    expect(likely!.stats().cachedPrompts).toBe(1); // s only: q never saved
    expect(other!.stats().cachedPrompts).toBe(2); // q saved at s's start, then s
  });

  it("reuses for a tenant only when every world says the content is its own", () => {
    const { worlds, q } = overtaken();
    const prompt = cat(q, range(8000, 20));
    // Slot 0 holds A's s: the likeliest world restores nothing there and lets A reuse it, but had q
    // been saved, the server restores B's q into slot 0 for this prompt.
    expect(worlds.primary.reuses(0, prompt, [0, 1], A)).toBe(true);
    expect(worlds.every((m) => m.reuses(0, prompt, [0, 1], A))).toBe(false);
  });

  it("drops the worlds a report contradicts", () => {
    const { worlds, q } = overtaken();
    const prompt = cat(q, range(8000, 20));
    // B's own q: the world where q was saved predicts 100 cached, the other none.
    const predicted = worlds.launch(0, (m) => m.launch(0, prompt, [0, 1], B));
    expect(predicted).toBe(0);
    expect(worlds.report(0, 100)).toBe(true);
    expect(worlds.size).toBe(1);
    expect(worlds.primary.stats().cachedPrompts).toBeGreaterThan(0);
    expect(worlds.dropped).toBeGreaterThan(0);
  });

  it("keeps every world when none foresaw the report (a resync follows)", () => {
    const { worlds, q } = overtaken();
    worlds.launch(0, (m) => m.launch(0, q, [0, 1], B));
    expect(worlds.report(0, 7)).toBe(false);
    expect(worlds.size).toBe(2);
  });

  it("merges identical worlds and keeps at most MAX_WORLDS", () => {
    const worlds = new MirrorWorlds(new SlotMirror(SLOT_SERVER));
    worlds.fork(() => {}, true);
    expect(worlds.size).toBe(1);
    for (let i = 0; i < 6; i++) {
      const p = range(100 * (i + 1), 50);
      worlds.fork(
        (m) => {
          m.restore(0, p, A);
          m.idleSaved(0);
        },
        i % 2 === 0,
      );
    }
    expect(worlds.size).toBeLessThanOrEqual(MAX_WORLDS);
    expect(worlds.size).toBeGreaterThan(1);
  });
});
