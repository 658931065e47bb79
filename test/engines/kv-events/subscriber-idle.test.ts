/**
 * The KV-event subscriber while the publisher is idle: a history replay that failed is tried again
 * whether or not the idle probe is on.
 */
import { afterEach, describe, expect, test } from "vitest";
import { block, closeOpen, setup, T, waitFor } from "./subscriber-setup.js";

afterEach(closeOpen);

describe("a failed history replay while the engine is idle", () => {
  test("is tried again with the idle probe off", async () => {
    const { pub, mirror, sub } = await setup(
      {},
      { probeIntervalMs: 0, historyRetryMs: 100, replayTimeoutMs: 300 },
      async (p) => {
        await p.publish([block(10)]);
        await p.publish([block(12, 10)]);
        p.unterminatedReplays = 1; // the first history replay never ends: it times out
      },
    );
    await waitFor("the history, read again", () => sub.status().synced, 10_000);
    expect(sub.status()).toMatchObject({ nextSequence: 2, replayFailures: 1 });
    expect(pub.replayRequests.length).toBeGreaterThanOrEqual(2);
    expect(mirror.match(T(10, 11, 12, 13))).toBe(4);
    expect(mirror.degraded).toBeUndefined();
  });
});
