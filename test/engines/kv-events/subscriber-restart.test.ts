/**
 * Publisher restarts: with no replay endpoint, shown by the numbering going back, the mirror and the
 * numbering start afresh from the new publisher's batches, and only batches truly missed count; and
 * the restart checks read sequence numbers and batch bytes, never clocks, so an engine whose clock
 * was set back is told apart as well.
 */
import { afterEach, describe, expect, test } from "vitest";
import { type DoubleEvent, encodeBatch } from "./publisher-double.js";
import { block, closeOpen, setup, T, waitFor } from "./subscriber-setup.js";

afterEach(closeOpen);

describe("a restart with no replay endpoint", () => {
  async function oldEngine() {
    const s = await setup({ replay: "none" }, { replayEndpoint: undefined });
    await s.pub.publish([block(10)]);
    await s.pub.publish([block(12, 10)]);
    await s.pub.publish([block(14, 12)]);
    await waitFor("three batches", () => s.sub.status().nextSequence === 3);
    return s;
  }

  test("its first batch received: a fresh start, exact, nothing counted lost", async () => {
    const { pub, mirror, sub } = await oldEngine();
    pub.restart();
    await pub.publish([block(20)]);
    await pub.publish([block(22, 20)]);
    await waitFor("the new publisher's batches", () => sub.status().nextSequence === 2);
    expect(sub.status()).toMatchObject({ restarts: 1, gaps: 0, synced: true });
    expect(mirror.degraded).toBeUndefined();
    expect(mirror.stats().counters.forgotten).toBe(0);
    expect(mirror.sequences()).toEqual([T(20, 21, 22, 23)]);
  });

  test("its first batch lost: degraded for that batch alone, then followed", async () => {
    const { pub, mirror, sub } = await oldEngine();
    pub.restart();
    await pub.publish([block(20)], { drop: true });
    await pub.publish([block(22)]);
    await pub.publish([block(24, 22)]);
    await waitFor("the new publisher's batches", () => mirror.match(T(22, 23, 24, 25)) === 4);
    expect(sub.status()).toMatchObject({ restarts: 1, gaps: 0 });
    expect(mirror.degraded).toMatch(/before 1 are unknown/);
    expect(mirror.stats().counters.forgotten).toBe(0);
    expect(mirror.sequences()).toEqual([T(22, 23, 24, 25)]);
  });
});

describe("a restart on an engine whose clock went back", () => {
  const stampedAt = (events: DoubleEvent[], ts: number) => ({
    payload: encodeBatch("vllm-array", events, ts, 0),
  });

  test("numbering past ours, batch times earlier than the old engine's: found by the gap's replay", async () => {
    const { pub, mirror, sub } = await setup();
    await waitFor("sync", () => sub.status().synced);
    await pub.publish([block(10)], stampedAt([block(10)], 1_800_000_000));
    await pub.publish([block(12, 10)], stampedAt([block(12, 10)], 1_800_000_001));
    await waitFor("two batches", () => sub.status().nextSequence === 2);
    pub.restart();
    // Each new batch is stamped before every old one, as after the clock was set back.
    for (const [i, ev] of [block(20), block(22, 20), block(24, 22)].entries())
      await pub.publish([ev], { ...stampedAt([ev], 1_700_000_000 + i), drop: true });
    await pub.publish([block(30)], stampedAt([block(30)], 1_700_000_010));
    await waitFor("the live batch", () => sub.status().nextSequence === 4);
    expect(sub.status().restarts).toBe(1);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(0);
    expect(mirror.match(T(20, 21, 22, 23, 24, 25))).toBe(6);
    expect(mirror.degraded).toBeUndefined();
  });
});

describe("SGLang's epoch in the topic frame (a publisher with a snapshot endpoint)", () => {
  test("batches whose topic carries an epoch, and its snapshot barriers, are the topic's", async () => {
    const { pub, mirror, sub } = await setup({ replay: "none", epoch: "e1" }, { replayEndpoint: undefined });
    await pub.publish([block(10)]);
    // A barrier: an empty batch numbered like the rest, on the epoch topic plus a snapshot marker.
    const seq = Buffer.alloc(8);
    seq.writeBigInt64BE(1n);
    await pub.sendRaw([
      "kv-events\u0000sgl-kv-epoch=e1\u0000sgl-kv-snapshot=b1",
      seq,
      encodeBatch("sglang-array", [], 1_700_000_000, 0),
    ]);
    await waitFor("both batches", () => sub.status().nextSequence === 2);
    expect(sub.status()).toMatchObject({ rejected: 0, gaps: 0 });
    expect(mirror.sequences()).toEqual([T(10, 11)]);
    // Another topic with the marker is not this one.
    await pub.sendRaw(["kv-events-2\u0000sgl-kv-epoch=e1", seq, encodeBatch("sglang-array", [], 1, 0)]);
    await waitFor("the other topic refused", () => sub.status().rejected === 1);
  });

  test("another epoch is a restart, even numbered past the last batch", async () => {
    const { pub, mirror, sub } = await setup({ replay: "none", epoch: "e1" }, { replayEndpoint: undefined });
    await pub.publish([block(10)]);
    await waitFor("the old publisher's batch", () => sub.status().nextSequence === 1);
    pub.restart("e2");
    await pub.publish([block(20)], { drop: true });
    await pub.publish([block(22)], { drop: true });
    await pub.publish([block(24)]);
    await waitFor("the new publisher's batch", () => mirror.match(T(24, 25)) === 2);
    expect(sub.status()).toMatchObject({ restarts: 1 });
    // The old engine's block went with its cache, not kept as if still held.
    expect(mirror.sequences()).toEqual([T(24, 25)]);
  });
});
