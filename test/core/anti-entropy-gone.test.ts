/**
 * The full mesh's epochs of peers removed at run time (anti-entropy.ts `gone`): what tells a peer
 * back after a restart while it was out (`renewed`), kept for at most MAX_GONE peers.
 */
import { describe, expect, it } from "vitest";
import { AntiEntropy, MAX_GONE } from "../../src/core/node/anti-entropy.js";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import type { Snapshot } from "../../src/core/snapshot.js";

const beat = (sender: string, epoch: number): Snapshot => ({
  kind: "heartbeat",
  header: { sender, epoch, version: 1, tokenCount: 0, capacity: 10_000, queueDepth: 0, pushBackMs: 0 },
});

function mesh(): AntiEntropy {
  const ae = new AntiEntropy(resolveNodeConfig({ id: "self", capacityTokens: 10_000 }), "self");
  ae.reset(1, [], 64);
  return ae;
}

/** `id` joins, says `epoch`, and is removed. */
function visit(ae: AntiEntropy, id: string, epoch: number): void {
  ae.add(id);
  ae.onSnapshot(id, beat(id, epoch), undefined, undefined, 0, undefined);
  ae.remove(id);
}

describe("anti-entropy: epochs of peers removed at run time", () => {
  it("a newer epoch back is a restart while out, the same one is not; either ends the entry", () => {
    const ae = mesh();
    visit(ae, "b", 100);
    visit(ae, "c", 100);
    expect(ae.goneEpoch("b")).toBe(100);
    ae.add("b");
    ae.add("c");
    expect(ae.onSnapshot("b", beat("b", 100), undefined, undefined, 0, undefined).renewed).toBe(false);
    expect(ae.onSnapshot("c", beat("c", 200), undefined, undefined, 0, undefined).renewed).toBe(true);
    expect(ae.goneEpoch("b")).toBeUndefined();
    expect(ae.goneEpoch("c")).toBeUndefined();
  });

  it(`remembers at most ${MAX_GONE} peers, forgetting the one gone longest; our restart forgets all`, () => {
    const ae = mesh();
    for (let i = 0; i <= MAX_GONE; i++) visit(ae, `p${i}`, 100 + i);
    expect(ae.goneEpoch("p0")).toBeUndefined();
    expect(ae.goneEpoch("p1")).toBe(101);
    // Gone again: the newest gone, so kept past the next one to go.
    visit(ae, "p1", 101);
    visit(ae, "q", 1);
    expect(ae.goneEpoch("p1")).toBe(101);
    expect(ae.goneEpoch("p2")).toBeUndefined();
    let kept = 0;
    for (let i = 0; i <= MAX_GONE; i++) if (ae.goneEpoch(`p${i}`) !== undefined) kept++;
    expect(kept + (ae.goneEpoch("q") === undefined ? 0 : 1)).toBe(MAX_GONE);
    ae.reset(2, [], 64);
    expect(ae.goneEpoch("q")).toBeUndefined();
  });
});
