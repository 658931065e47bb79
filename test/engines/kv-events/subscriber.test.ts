/**
 * The KV-event subscriber against the KV-event publisher test double on 127.0.0.1: history, live
 * batches, gaps recovered by replay, gaps replay cannot cover (degraded, then rebuilt from new
 * events), a cleared cache, a publisher restart, and malformed or oversized messages. Restarts the
 * numbering hides: subscriber-restart-unseen.test.ts.
 */
import { afterEach, describe, expect, test } from "vitest";
import { type DoubleEvent, type Style, seq8 } from "./publisher-double.js";
import {
  block,
  closeOpen,
  freePort,
  oldEngineBlocks,
  rebound,
  setup,
  T,
  waitFor,
} from "./subscriber-setup.js";

afterEach(closeOpen);

describe("following a publisher", () => {
  test("history from sequence 0 by replay, then live batches", async () => {
    const { pub, mirror, sub } = await setup({}, {}, async (p) => {
      await p.publish([block(10)]);
      await p.publish([block(12, 10)]);
    });
    await waitFor("the history", () => sub.status().synced && sub.status().nextSequence === 2);
    await pub.publish([block(14, 12)]);
    await waitFor("the live batch", () => sub.status().nextSequence === 3);
    expect(mirror.match(T(10, 11, 12, 13, 14, 15, 99))).toBe(6);
    expect(mirror.degraded).toBeUndefined();
    expect(pub.replayRequests[0]).toBe(0);
  });

  test("a gap is recovered from the replay endpoint", async () => {
    const { pub, mirror, sub } = await setup();
    await waitFor("sync", () => sub.status().synced);
    await pub.publish([block(10)]);
    await pub.publish([block(12, 10)], { drop: true });
    await pub.publish([block(14, 12)]);
    await waitFor("the gap to close", () => sub.status().nextSequence === 3);
    expect(mirror.match(T(10, 11, 12, 13, 14, 15))).toBe(6);
    expect(mirror.degraded).toBeUndefined();
    expect(sub.status()).toMatchObject({ gaps: 1, replayFailures: 0 });
    // From the last batch applied (0), not the first missing (1): it tells the publisher apart.
    expect(pub.replayRequests).toContain(0);
    expect(sub.status().restarts).toBe(0);
  });

  test("a batch lost with no live batch after it is found by the idle probe", async () => {
    const { pub, mirror, sub } = await setup({}, { probeIntervalMs: 100 });
    await waitFor("sync", () => sub.status().synced);
    await pub.publish([block(10)]);
    await pub.publish([block(12, 10)], { drop: true });
    await waitFor("the probe", () => sub.status().nextSequence === 2);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(4);
    expect(mirror.degraded).toBeUndefined();
  });

  test("a gap the buffer no longer covers: degraded, then rebuilt from new events, exact after a clear", async () => {
    const { pub, mirror, sub } = await setup({ bufferSteps: 2 });
    await waitFor("sync", () => sub.status().synced);
    await pub.publish([block(10)]);
    await pub.publish([block(20)], { drop: true }); // lost for good: the buffer keeps two batches
    await pub.publish([block(22, 20)], { drop: true });
    await pub.publish([block(30)], { drop: true });
    await pub.publish([block(32, 30)]);
    await waitFor("the gap to be handled", () => sub.status().nextSequence === 5);
    expect(mirror.degraded).toMatch(/lost batches 1–2/);
    expect(mirror.match(T(20, 21, 22, 23))).toBe(0); // what the lost batches stored is unknown
    expect(mirror.match(T(10, 11))).toBe(0); // and whether they removed what was held before
    expect(mirror.match(T(30, 31, 32, 33))).toBe(4); // the buffered part of the gap was replayed
    await pub.publish([block(40), block(42, 40)]);
    await waitFor("new events", () => sub.status().nextSequence === 6);
    expect(mirror.match(T(40, 41, 42, 43))).toBe(4);
    expect(mirror.degraded).toBeDefined();
    await pub.publish([{ type: "AllBlocksCleared" }, block(50)]);
    await waitFor("the clear", () => sub.status().nextSequence === 7);
    expect(mirror.degraded).toBeUndefined();
    expect(mirror.sequences()).toEqual([T(50, 51)]);
  });

  test("a silent replay endpoint: the replay times out and the mirror degrades", async () => {
    const { pub, mirror, sub } = await setup({ replay: "silent" }, { replayTimeoutMs: 300 });
    // The history request at start times out too; a first live batch numbered 0 needs none.
    await pub.publish([block(10)]);
    await waitFor("batch 0", () => sub.status().nextSequence === 1);
    expect(mirror.degraded).toBeUndefined();
    await pub.publish([block(12, 10)], { drop: true });
    await pub.publish([block(14)]);
    await waitFor("the timeout", () => sub.status().nextSequence === 3);
    expect(mirror.degraded).toMatch(/lost batches 1–1: the replay timed out/);
    expect(mirror.match(T(14, 15))).toBe(2);
    expect(sub.status().replayFailures).toBeGreaterThanOrEqual(2);
  });

  test("live batches queued during a replay are bounded: the oldest are dropped, then the stream goes on", async () => {
    const { pub, mirror, sub } = await setup(
      { replay: "silent" },
      { replayTimeoutMs: 500, maxQueuedBatches: 4 },
    );
    await pub.publish([block(10)]);
    await waitFor("batch 0", () => sub.status().nextSequence === 1);
    await pub.publish([block(12, 10)], { drop: true });
    await pub.publish([block(14)]); // a gap: the worker waits on the silent replay endpoint
    await waitFor("the replay", () => sub.status().state === "replaying");
    for (let i = 0; i < 20; i++) await pub.publish([block(100 + 2 * i)]);
    await waitFor("the stream to go on", () => sub.status().nextSequence === pub.nextSeq);
    expect(sub.status().dropped).toBeGreaterThanOrEqual(20 - 4);
    expect(mirror.degraded).toMatch(/lost batches 1–1/);
    expect(mirror.match(T(138, 139))).toBe(2);
  });

  test("an unreachable replay endpoint: the gap degrades the mirror", async () => {
    const port = await freePort();
    const { pub, mirror, sub } = await setup(
      { replay: "none" },
      { replayEndpoint: `tcp://127.0.0.1:${port}`, replayTimeoutMs: 300 },
    );
    await pub.publish([block(10)]);
    await waitFor("batch 0", () => sub.status().nextSequence === 1);
    await pub.publish([block(12, 10)], { drop: true });
    await pub.publish([block(14)]);
    await waitFor("the gap", () => sub.status().nextSequence === 3);
    expect(mirror.degraded).toMatch(/unreachable|timed out/);
    expect(mirror.match(T(14, 15))).toBe(2);
  });

  test("no replay endpoint and a history already under way: degraded from the start", async () => {
    const { pub, mirror, sub } = await setup({ replay: "none" }, { replayEndpoint: undefined }, async (p) => {
      await p.publish([block(10)]);
    });
    await pub.publish([block(12)]);
    await waitFor("the first live batch", () => sub.status().nextSequence === 2);
    expect(mirror.degraded).toMatch(/before 1 are unknown/);
    expect(mirror.match(T(12, 13))).toBe(2);
  });

  test("a publisher restart (numbering back at 0) clears the mirror", async () => {
    const { pub, mirror, sub } = await setup();
    await oldEngineBlocks(pub, sub);
    pub.restart();
    await pub.publish([block(20)]);
    await waitFor("the restart", () => sub.status().restarts === 1 && sub.status().nextSequence === 1);
    expect(mirror.sequences()).toEqual([T(20, 21)]);
    expect(mirror.degraded).toBeUndefined();
  });
});

describe("a gap's replay stops at the live batch that showed it", () => {
  test("the batches queued behind it are not read again, nor waited for", async () => {
    // A busy engine: while the gap's replay is asked for, more live batches come and queue. The
    // replay need only bring the batches before the one that showed the gap; read whole, it would
    // bring the queued ones again and, with the end marker slow to come, wait out its deadline.
    const { pub, mirror, sub } = await setup({}, { replayTimeoutMs: 1_000 });
    await waitFor("sync", () => sub.status().synced);
    await pub.publish([block(10)]);
    await waitFor("batch 0", () => sub.status().nextSequence === 1);
    const release = pub.holdReplays();
    await pub.publish([block(12, 10)], { drop: true });
    await pub.publish([block(14, 12)]); // batch 2 shows the gap
    await waitFor("the gap's replay", () => pub.replayRequests.length === 2);
    for (let i = 0; i < 20; i++) await pub.publish([block(100 + 2 * i)]);
    await waitFor("the batches behind it to queue", () => sub.status().queued === 20);
    pub.unterminatedReplays = 1;
    release();
    await waitFor(
      "the stream",
      () => sub.status().nextSequence === pub.nextSeq && sub.status().state === "live",
    );
    // Batch 0 (the publisher's check) and batch 1 (the gap) only; the end marker was never waited for.
    expect(sub.status()).toMatchObject({ gaps: 1, replays: 2, replayedBatches: 1, replayFailures: 0 });
    expect(mirror.match(T(10, 11, 12, 13, 14, 15))).toBe(6);
    expect(mirror.match(T(138, 139))).toBe(2);
    expect(mirror.degraded).toBeUndefined();
    expect(mirror.stats().counters.forgotten).toBe(0);
  });

  test("a replay whose end never comes: nothing was lost, the mirror keeps its blocks and stays exact", async () => {
    // It once read on past the gap, failed at its deadline, and took the gap it had brought for lost.
    const { pub, mirror, sub } = await setup({}, { replayTimeoutMs: 300 });
    await oldEngineBlocks(pub, sub);
    await pub.publish([block(14, 12)], { drop: true });
    pub.unterminatedReplays = 1; // it brings batches 1–3, then no end marker
    await pub.publish([block(16, 14)]);
    await waitFor("the replay's end", () => sub.status().nextSequence === 4 && sub.status().state === "live");
    expect(sub.status()).toMatchObject({ gaps: 1, replayFailures: 0 });
    expect(mirror.match(T(10, 11, 12, 13, 14, 15, 16, 17))).toBe(8);
    expect(mirror.degraded).toBeUndefined();
    expect(mirror.stats().counters.forgotten).toBe(0);
  });

  test("a live batch from before a restart the replay finds is not laid on the new history", async () => {
    // The old publisher's batch that shows a gap waits in the queue while the worker waits on a
    // replay; then the engine restarts, and the gap's replay finds the new publisher, whose numbering
    // already passed that batch. The new history read only up to its number would be followed by
    // the old engine's batch, in a mirror said to be exact.
    const { pub, mirror, sub } = await setup({ replay: "silent" }, { replayTimeoutMs: 1_500 });
    await pub.publish([block(10)]);
    await pub.publish([block(12, 10)]);
    await waitFor("two batches", () => sub.status().nextSequence === 2);
    await pub.publish([block(14, 12)], { drop: true });
    await pub.publish([block(16, 14)]); // batch 3: a gap, its replay never answered
    await waitFor("the gap's replay", () => sub.status().gaps === 1);
    await pub.publish([block(18, 16)], { drop: true });
    await pub.publish([block(50)]); // batch 5: another gap, queued behind
    await waitFor("the old engine's batch to queue", () => sub.status().queued === 1);
    await pub.close();
    const again = await rebound(pub);
    for (let i = 0; i < 8; i++) await again.publish([block(20 + 2 * i)], { drop: true });
    await waitFor(
      "the new history",
      () => sub.status().restarts === 1 && sub.status().queued === 0 && sub.status().state === "live",
    );
    expect(mirror.match(T(50, 51))).toBe(0);
    expect(mirror.match(T(20, 21))).toBe(2);
    expect(mirror.match(T(34, 35))).toBe(2);
    expect(sub.status().nextSequence).toBe(8);
    expect(mirror.degraded).toBeUndefined();
  });
});

describe("malformed input", () => {
  test("bad frames, another topic, a bad sequence number, a payload that does not decode", async () => {
    const { pub, mirror, sub } = await setup();
    await waitFor("sync", () => sub.status().synced);
    await pub.publish([block(10)]);
    await pub.sendRaw(["kv-events", seq8(1)]);
    await pub.sendRaw(["kv-events-other", seq8(1), new Uint8Array([0x90])]);
    await pub.sendRaw(["kv-events", new Uint8Array([0, 1]), new Uint8Array([0x90])]);
    await waitFor("the rejections", () => sub.status().rejected === 3);
    expect(mirror.degraded).toBeUndefined();
    await pub.publish([], { payload: new Uint8Array([0xc1, 0xff, 0x00]) });
    await pub.publish([block(14)]);
    await waitFor("the batches", () => sub.status().nextSequence === 3);
    expect(sub.status().rejected).toBe(4);
    expect(mirror.degraded).toMatch(/batch 1 could not be decoded/);
    expect(mirror.match(T(14, 15))).toBe(2);
    expect(mirror.match(T(10, 11))).toBe(2);
  });

  test("an oversized message is refused and the stream goes on", async () => {
    const { pub, mirror, sub } = await setup(
      {},
      { limits: { maxPayloadBytes: 4096 }, replayTimeoutMs: 2_000 },
    );
    await waitFor("sync", () => sub.status().synced);
    await pub.publish([block(10)]);
    const huge: DoubleEvent = {
      type: "BlockStored",
      hashes: [20],
      parent: null,
      tokens: Array.from({ length: 4000 }, (_, i) => 70_000 + i),
      blockSize: 4000,
    };
    await pub.publish([huge]);
    // ZMQ drops the connection on an oversized frame and makes it again; batches sent while it is
    // down are lost to the SUB and found as a gap.
    // Batches keep coming until the SUB is back and has caught up (a generous deadline: the
    // reconnect can take seconds on a busy machine, and only a later batch shows the gap).
    for (let i = 0, t0 = Date.now(); sub.status().nextSequence !== pub.nextSeq; i++) {
      if (Date.now() - t0 > 20_000) throw new Error("timed out waiting for the stream to go on");
      await pub.publish([block(30 + 2 * i)]);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(sub.status().reconnects).toBeGreaterThanOrEqual(1);
    // The oversized batch cannot be replayed either: its events are lost, and the mirror says so.
    expect(mirror.degraded).toMatch(/lost batches 1–/);
    expect(mirror.match(T(70_000))).toBe(0);
    expect(mirror.match(T(10, 11))).toBe(0); // the lost batch may have removed it: forgotten
    const lastBlock = 30 + 2 * (pub.nextSeq - 3);
    expect(mirror.match(T(lastBlock, lastBlock + 1))).toBe(2);
  });
});

describe.each<Style>(["vllm-map", "vllm-map-batch", "sglang-array", "sglang-map"])(
  "the %s encoding",
  (style) => {
    test("history, live batches and a removal", async () => {
      const { pub, mirror, sub } = await setup({ style }, {}, async (p) => {
        await p.publish([block(10), block(12, 10)]);
      });
      await waitFor("the history", () => sub.status().nextSequence === 1);
      await pub.publish([{ type: "BlockRemoved", hashes: [12] }, block(14, 10)]);
      await waitFor("the live batch", () => sub.status().nextSequence === 2);
      expect(mirror.sequences()).toEqual([T(10, 11, 14, 15)]);
      expect(mirror.degraded).toBeUndefined();
    });
  },
);
