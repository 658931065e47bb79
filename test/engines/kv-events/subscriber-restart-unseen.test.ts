/**
 * The KV-event subscriber against the KV-event publisher test double on 127.0.0.1, across publisher
 * restarts it cannot see in the numbering: one whose numbering passed ours (found by a gap's replay,
 * the idle probe or a reconnect's check), and one seen only as a gap no replay can compare.
 */
import { afterEach, describe, expect, test } from "vitest";
import { KvEventPublisherDouble } from "./publisher-double.js";
import {
  block,
  closeOpen,
  freePort,
  oldEngineBlocks,
  open,
  rebound,
  setup,
  T,
  waitFor,
} from "./subscriber-setup.js";

afterEach(closeOpen);

/** The engine restarts and its first three batches (one chain, 6 tokens) never arrive live. */
async function restartedUnseen(pub: KvEventPublisherDouble): Promise<void> {
  pub.restart();
  await pub.publish([block(20)], { drop: true });
  await pub.publish([block(22, 20)], { drop: true });
  await pub.publish([block(24, 22)], { drop: true });
}

describe("a publisher restart whose numbering passed ours", () => {
  // The new engine's first batches never arrived live (lost while the SUB reconnected), so the
  // first one seen is numbered above the last seen from the old publisher: no drop to notice.
  test("found by the gap's replay: the old engine's blocks are dropped", async () => {
    const { pub, mirror, sub } = await setup();
    await oldEngineBlocks(pub, sub);
    await restartedUnseen(pub);
    await pub.publish([block(30)]);
    await waitFor("the live batch", () => sub.status().nextSequence === 4);
    expect(sub.status().restarts).toBe(1);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(0);
    expect(mirror.match(T(20, 21, 22, 23, 24, 25))).toBe(6);
    expect(mirror.match(T(30, 31))).toBe(2);
    expect(mirror.degraded).toBeUndefined();
  });

  test("found by the idle probe: the old engine's blocks are dropped", async () => {
    const { pub, mirror, sub } = await setup({}, { probeIntervalMs: 100 });
    await oldEngineBlocks(pub, sub);
    await restartedUnseen(pub);
    await waitFor("the probe", () => sub.status().nextSequence === 3 && sub.status().restarts === 1);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(0);
    expect(mirror.match(T(20, 21, 22, 23, 24, 25))).toBe(6);
    expect(mirror.degraded).toBeUndefined();
  });

  test("found after a reconnect, even numbered exactly as expected", async () => {
    const { pub, mirror, sub } = await setup();
    await oldEngineBlocks(pub, sub);
    await pub.close();
    const again = await rebound(pub);
    await again.publish([block(20)], { drop: true });
    await again.publish([block(22, 20)], { drop: true });
    await again.publish([block(30)]);
    await waitFor("the live batch", () => sub.status().nextSequence === 3);
    expect(sub.status().restarts).toBe(1);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(0);
    expect(mirror.match(T(20, 21, 22, 23))).toBe(4);
    expect(mirror.match(T(30, 31))).toBe(2);
  });

  test("after a reconnect, a restart the live numbering shows is handled once", async () => {
    const { pub, mirror, sub } = await setup();
    await waitFor("sync", () => sub.status().synced);
    await pub.publish([block(10)]);
    await pub.publish([block(12, 10)]);
    await pub.publish([block(14, 12)]);
    await waitFor("three batches", () => sub.status().nextSequence === 3);
    await pub.close();
    const again = await rebound(pub);
    await again.publish([block(20)], { drop: true });
    await again.publish([block(22, 20)], { drop: true });
    await again.publish([block(30)]);
    await waitFor("the live batch", () => sub.status().nextSequence === 3 && mirror.match(T(30, 31)) === 2);
    await again.publish([block(32, 30)]);
    await waitFor("the next batch", () => sub.status().nextSequence === 4);
    expect(sub.status().restarts).toBe(1);
    expect(mirror.match(T(10, 11))).toBe(0);
    expect(mirror.match(T(20, 21, 22, 23))).toBe(4);
  });

  test("after a reconnect, batches queued before the drop do not use up the check", async () => {
    // The worker waits on a replay the old publisher never answers while its last batch is queued,
    // then the publisher goes: a check made before that batch reaches nobody, fails, and would let
    // the new publisher's batches through on top of the old engine's blocks.
    const { pub, mirror, sub } = await setup({ replay: "silent" }, { replayTimeoutMs: 1_500 });
    await pub.publish([block(10)]);
    await pub.publish([block(12, 10)]);
    await waitFor("two batches", () => sub.status().nextSequence === 2);
    await pub.publish([block(14, 12)], { drop: true });
    await pub.publish([block(16, 14)]);
    await waitFor("the gap's replay", () => sub.status().gaps === 1);
    await pub.publish([block(18, 16)]);
    await waitFor("a batch queued behind it", () => sub.status().queued === 1);
    await pub.close();
    await waitFor("the queued batch", () => sub.status().nextSequence === 5);
    const again = await rebound(pub);
    for (const t of [20, 22, 24, 26, 28]) await again.publish([block(t)], { drop: true });
    await again.publish([block(30)]);
    await waitFor("the new publisher's live batch", () => mirror.match(T(30, 31)) === 2);
    expect(sub.status().restarts).toBe(1);
    expect(mirror.match(T(10, 11))).toBe(0);
    expect(mirror.match(T(18, 19))).toBe(0);
    expect(mirror.match(T(28, 29))).toBe(2);
    expect(mirror.degraded).toBeUndefined();
  });

  test("a publisher started again binds its closed predecessor's ports, however soon", async () => {
    // ZMQ frees a closed socket's port in its I/O thread a moment later: an immediate bind there
    // sometimes found it in use, and the reconnect tests above failed now and then.
    let pub = await KvEventPublisherDouble.start();
    for (let i = 0; i < 300; i++) {
      await pub.close();
      pub = await KvEventPublisherDouble.start({
        bindAt: { endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint },
      });
    }
    open.push(pub);
    expect(pub.endpoint).toMatch(/^tcp:\/\/127\.0\.0\.1:/);
  });

  test("found by a replay that then fails: the restart is handled, not taken for lost batches", async () => {
    // The check tells the publisher apart at its first batch; the replay failing later (its deadline
    // passed before the end marker) does not undo what the check found.
    const { pub, mirror, sub } = await setup({}, { replayTimeoutMs: 300 });
    await oldEngineBlocks(pub, sub);
    await restartedUnseen(pub);
    pub.unterminatedReplays = 1;
    await pub.publish([block(30)]);
    await waitFor("the live batch", () => sub.status().nextSequence === 4);
    expect(sub.status()).toMatchObject({ restarts: 1, replayFailures: 1 });
    expect(mirror.match(T(10, 11, 12, 13))).toBe(0);
    expect(mirror.match(T(20, 21, 22, 23, 24, 25))).toBe(6);
    expect(mirror.degraded).toBeUndefined();
  });

  test("a history read after the connection dropped is not cut at a batch the old publisher sent", async () => {
    // The first history read waits on a publisher that never answers, while its live batch queues;
    // then the engine restarts. The next history reaches the new publisher, whose numbering already
    // passed the queued batch: read only up to it, the old engine's batch would follow the new history.
    const { pub, mirror, sub } = await setup({ replay: "silent" }, { replayTimeoutMs: 1_500 }, async (p) => {
      await p.publish([block(10)]);
      await p.publish([block(12, 10)]);
    });
    await waitFor("the history's replay", () => pub.replayRequests.length === 1);
    await pub.publish([block(50)]); // batch 2, queued behind the history
    await waitFor("the old engine's batch to queue", () => sub.status().queued === 1);
    await pub.close();
    const again = await rebound(pub);
    for (let i = 0; i < 6; i++) await again.publish([block(20 + 2 * i)], { drop: true });
    await waitFor("the new history", () => sub.status().synced && sub.status().queued === 0);
    await waitFor("live", () => sub.status().state === "live");
    expect(mirror.match(T(50, 51))).toBe(0);
    expect(mirror.match(T(20, 21))).toBe(2);
    expect(mirror.match(T(30, 31))).toBe(2);
    expect(sub.status().nextSequence).toBe(6);
    expect(mirror.degraded).toBeUndefined();
  });

  test("the new history read whole, failing after it brought the waiting batch: nothing lost", async () => {
    // The history after a replay found the restart is read to its end; its end marker never comes,
    // but it brought every batch up to the live one waiting and past it: none is missing, and none
    // may be applied a second time.
    const { pub, mirror, sub } = await setup({}, { replayTimeoutMs: 300 });
    await oldEngineBlocks(pub, sub);
    await restartedUnseen(pub);
    pub.unterminatedReplays = 2; // the gap's replay, then the history
    await pub.publish([block(30)]);
    await waitFor("the history", () => sub.status().replayFailures === 2 && sub.status().state === "live");
    await waitFor("the live batch", () => sub.status().nextSequence === 4);
    expect(sub.status().restarts).toBe(1);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(0);
    expect(mirror.match(T(20, 21, 22, 23, 24, 25))).toBe(6);
    expect(mirror.match(T(30, 31))).toBe(2);
    expect(mirror.stats().counters.stored).toBe(6);
    expect(mirror.degraded).toBeUndefined();
  });

  test("the same publisher's replays leave the mirror alone", async () => {
    const { pub, mirror, sub } = await setup({}, { probeIntervalMs: 100 });
    await waitFor("sync", () => sub.status().synced);
    await pub.publish([block(10)]);
    await pub.publish([block(12, 10)], { drop: true });
    await waitFor("the probe", () => sub.status().nextSequence === 2);
    const replays = sub.status().replays;
    await waitFor("more probes", () => sub.status().replays >= replays + 2);
    expect(sub.status().restarts).toBe(0);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(4);
    expect(mirror.degraded).toBeUndefined();
  });
});

describe("a restart seen only as a gap", () => {
  // The new engine's first batches are lost (the SUB reconnecting), its numbering already passed
  // ours, and no replay can compare the last batch applied: nothing says whether the engine restarted.
  // Its old blocks must not stay in the mirror: no removal of them would ever come.
  async function restartedUnseen(pub: KvEventPublisherDouble, lost: number): Promise<void> {
    pub.restart();
    for (let i = 0; i < lost; i++) await pub.publish([block(20 + 2 * i)], { drop: true });
    await pub.publish([block(30)]);
  }

  test("no replay endpoint: the blocks held before the gap are forgotten", async () => {
    const { pub, mirror, sub } = await setup({ replay: "none" });
    await pub.publish([block(10)]);
    await pub.publish([block(12, 10)]);
    await waitFor("two batches", () => sub.status().nextSequence === 2);
    expect(mirror.degraded).toBeUndefined();
    await restartedUnseen(pub, 3);
    await waitFor("the gap", () => sub.status().nextSequence === 4);
    expect(mirror.degraded).toMatch(/lost batches 2–2: there is no replay endpoint/);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(0);
    expect(mirror.sequences()).toEqual([T(30, 31)]);
    expect(mirror.stats().counters.forgotten).toBe(2);
    // Blocks stored since are certain, and an old block's removal is expected, not a crash.
    await pub.publish([block(32, 30), { type: "BlockRemoved", hashes: [12] }]);
    await waitFor("the next batch", () => sub.status().nextSequence === 5);
    expect(mirror.match(T(30, 31, 32, 33))).toBe(4);
  });

  test("an unreachable replay endpoint: the blocks held before the gap are forgotten", async () => {
    const port = await freePort();
    const { pub, mirror, sub } = await setup(
      { replay: "none" },
      { replayEndpoint: `tcp://127.0.0.1:${port}`, replayTimeoutMs: 300 },
    );
    await pub.publish([block(10)]);
    await pub.publish([block(12, 10)]);
    await waitFor("two batches", () => sub.status().nextSequence === 2);
    await restartedUnseen(pub, 3);
    await waitFor("the gap", () => sub.status().nextSequence === 4);
    expect(mirror.degraded).toMatch(/lost batches 2–2: .*(unreachable|timed out)/);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(0);
    expect(mirror.sequences()).toEqual([T(30, 31)]);
  });

  test("a replay short of the last batch applied: the blocks held before the gap are forgotten", async () => {
    const { pub, mirror, sub } = await setup({ bufferSteps: 2 });
    await oldEngineBlocks(pub, sub);
    await restartedUnseen(pub, 4); // the new buffer holds batches 3 and 4 only
    await waitFor("the gap", () => sub.status().nextSequence === 5);
    expect(sub.status().restarts).toBe(0); // batch 1, to compare, is gone from the buffer
    expect(mirror.degraded).toMatch(/lost batches 2–2: the publisher no longer buffers them/);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(0);
    // What the replay brought after the lost batches is kept: it came after them.
    expect(mirror.match(T(26, 27))).toBe(2);
    expect(mirror.match(T(30, 31))).toBe(2);
  });

  test("a replay that starts just after the last batch applied cannot tell either: forgotten", async () => {
    const { pub, mirror, sub } = await setup({ bufferSteps: 2 });
    await oldEngineBlocks(pub, sub);
    await restartedUnseen(pub, 3); // the new buffer holds batches 2 and 3: none missing, none to compare
    await waitFor("the gap", () => sub.status().nextSequence === 4);
    expect(mirror.degraded).toMatch(/batch 1 is no longer buffered/);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(0);
    expect(mirror.match(T(24, 25))).toBe(2);
    expect(mirror.match(T(30, 31))).toBe(2);
  });

  test("a check after a reconnect that the replay cannot answer: forgotten, even with no gap", async () => {
    // The new publisher's ROUTER stays silent: its first live batch is numbered exactly as expected,
    // and only the failed check says a restart is possible.
    const { pub, mirror, sub } = await setup({}, { replayTimeoutMs: 300 });
    await oldEngineBlocks(pub, sub);
    await pub.close();
    const again = await KvEventPublisherDouble.start({
      replay: "silent",
      bindAt: { endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint },
    });
    open.push(again);
    await again.subscribed();
    await again.publish([block(20)], { drop: true });
    await again.publish([block(22, 20)], { drop: true });
    await again.publish([block(30)]);
    await waitFor("the live batch", () => sub.status().nextSequence === 3);
    expect(mirror.degraded).toMatch(/the connection dropped and the publisher could not be checked/);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(0);
    expect(mirror.sequences()).toEqual([T(30, 31)]);
  });

  test("an AllBlocksCleared after the gap makes the mirror exact again", async () => {
    const { pub, mirror, sub } = await setup({ replay: "none" });
    await pub.publish([block(10)]);
    await waitFor("batch 0", () => sub.status().nextSequence === 1);
    await restartedUnseen(pub, 2);
    await waitFor("the gap", () => sub.status().nextSequence === 3);
    expect(mirror.degraded).toBeDefined();
    await pub.publish([{ type: "AllBlocksCleared" }, block(40)]);
    await waitFor("the clear", () => sub.status().nextSequence === 4);
    expect(mirror.degraded).toBeUndefined();
    expect(mirror.sequences()).toEqual([T(40, 41)]);
  });
});
