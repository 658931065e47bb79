/**
 * The replay client against the publisher double's ROUTER on 127.0.0.1: one connection serves a
 * subscriber's replays, a reply left unread is never mixed into the next (nor waited for past half a
 * replay's bound), a replay that failed is not asked again on its socket, and one waiting for the last
 * reply's rest ends when the subscriber closes.
 */
import { afterEach, describe, expect, test } from "vitest";
import { ReplayClient } from "../../../src/engines/kv-events/replay-client.js";
import { KvEventPublisherDouble } from "./publisher-double.js";
import { block, closeOpen, open } from "./subscriber-setup.js";

afterEach(closeOpen);

async function setup(batches: number, timeoutMs = 2_000) {
  /** The subscriber's side: set when it closes. */
  const subscriber = { closed: false };
  const pub = await KvEventPublisherDouble.start();
  open.push(pub);
  for (let i = 0; i < batches; i++) await pub.publish([block(10 + 2 * i)], { drop: true });
  const client = new ReplayClient(
    { endpoint: pub.replayEndpoint, timeoutMs, maxBatches: 1_000, maxMessageSize: 1 << 20 },
    () => subscriber.closed,
  );
  open.push({ close: async () => client.close() });
  return { pub, client, subscriber };
}

/** A replay from `from` read until `until` (the end marker without one): the numbers it brought. */
async function read(client: ReplayClient, from: number, until?: number) {
  const seqs: number[] = [];
  const result = await client.request(from, (seq) => {
    seqs.push(seq);
    return until !== undefined && seq >= until;
  });
  return { result, seqs };
}

describe("the replay connection", () => {
  test("is one for every replay, even one read only in part", async () => {
    const { pub, client } = await setup(8);
    expect(await read(client, 2, 3)).toEqual({ result: { kind: "enough" }, seqs: [2, 3] });
    // The first reply's rest (4–7 and its end) is still coming: none of it is taken for this one.
    expect(await read(client, 5, 5)).toEqual({ result: { kind: "enough" }, seqs: [5] });
    expect(await read(client, 6)).toEqual({ result: { kind: "done" }, seqs: [6, 7] });
    expect(await read(client, 0, 0)).toEqual({ result: { kind: "enough" }, seqs: [0] });
    expect(pub.replayRequests).toEqual([2, 5, 6, 0]);
    expect(new Set(pub.replayConnections).size).toBe(1);
  });

  test("a replay that timed out is not asked again on its socket", async () => {
    const { pub, client } = await setup(3, 300);
    pub.unterminatedReplays = 1;
    expect((await read(client, 0)).result).toMatchObject({ kind: "failed", why: /timed out/ });
    expect(await read(client, 1)).toEqual({ result: { kind: "done" }, seqs: [1, 2] });
    expect(new Set(pub.replayConnections).size).toBe(2);
  });

  test("a replay waiting for the last reply's rest ends at once when the subscriber closes", async () => {
    const { pub, client, subscriber } = await setup(3, 4_000);
    pub.unterminatedReplays = 1;
    expect((await read(client, 0, 0)).result).toEqual({ kind: "enough" });
    await pub.close(); // the engine is gone: its reply's rest never ends
    const started = Date.now();
    const waiting = read(client, 1);
    subscriber.closed = true;
    client.close();
    expect((await waiting).result).toEqual({ kind: "failed", why: "closed" });
    // A new socket to the gone engine would hold the subscriber's close for the send's whole bound.
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  test("a reply's rest that never ends holds the next replay back at most half its bound", async () => {
    const { pub, client } = await setup(4, 4_000);
    pub.unterminatedReplays = 1;
    expect((await read(client, 0, 0)).result).toEqual({ kind: "enough" });
    const started = Date.now();
    expect(await read(client, 1)).toEqual({ result: { kind: "done" }, seqs: [1, 2, 3] });
    // Waiting out the rest's own bound, then a whole one more, would stall the live batches behind it.
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(new Set(pub.replayConnections).size).toBe(2);
  });
});
