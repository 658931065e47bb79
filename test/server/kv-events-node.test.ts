/**
 * A node in front of a FAKE vLLM-like server (test/engines/kv-events/fake-server.ts) whose KV events
 * come through the KV-event publisher test double: the node's own tree follows the server's cache,
 * evictions included: after each run, and as the events arrive between runs (engine-cache-changed);
 * its /metrics shows the stream's and the mirror's standing.
 */
import { encode } from "gpt-tokenizer";
import pino from "pino";
import { afterEach, describe, expect, test } from "vitest";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { postCompletion } from "../api-client.js";
import { fakePrefixCachingServer } from "../engines/kv-events/fake-server.js";
import { KvEventPublisherDouble } from "../engines/kv-events/publisher-double.js";
import { loopbackNodeSettings } from "./helpers.js";

const open: { close(): Promise<void> }[] = [];
let node: NodeHandle | undefined;
afterEach(async () => {
  await node?.stop();
  node = undefined;
  for (const o of open.splice(0).reverse()) await o.close();
});

async function waitFor(what: string, cond: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The publisher double, a fake server of `blockSize`-token blocks publishing to it, an engine whose
 * mirror subscribes (`kv` adds to its stream settings) and node "A" on it; all closed after the test.
 * No calibration: its runs would leave their own blocks in the server's cache, which these tests count.
 */
async function mirroredNode(blockSize: number, kv: { settleMs?: number } = {}) {
  const pub = await KvEventPublisherDouble.start();
  open.push(pub);
  const fake = await fakePrefixCachingServer(pub, { blockSize, tokenize: (t) => encode(t) });
  open.push(fake);
  const engine = await OpenAIEngine.create({
    baseUrl: fake.url,
    model: "m",
    kvEvents: { endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint, topic: "kv-events", ...kv },
  });
  await pub.subscribed();
  const settings = await loopbackNodeSettings({
    engine: "openai",
    model: "m",
    engineUrl: fake.url,
    calibrationMs: "0",
  });
  node = await startNode(settings, { logger: pino({ level: "silent" }), engine });
  return { pub, fake, engine };
}

describe("a node with a KV-event mirror", () => {
  test("its tree is the server's cache, after each run", async () => {
    const BS = 4;
    const { pub, fake, engine } = await mirroredNode(BS, { settleMs: 2_000 });
    const tree = async () =>
      ((await (await fetch(`${node!.apiUrl}/cluster`)).json()) as { treeTokens: number }).treeTokens;
    await waitFor("the history", async () => engine.kvEventsStatus()!.subscriber.synced);

    const first = "The quick brown fox jumps over the lazy dog, again and again and again.";
    const r1 = await postCompletion(node!.apiUrl, { model: "m", prompt: first, max_tokens: 1 });
    expect(r1.status).toBe(200);
    await r1.text();
    const n1 = Math.floor(encode(first).length / BS) * BS;
    expect(n1).toBeGreaterThan(0);
    await waitFor("the tree to hold the first prompt's blocks", async () => (await tree()) === n1);

    // The server evicts the first block: its whole chain becomes unreachable.
    const firstBlock = encode(first).slice(0, BS).join(",");
    await pub.publish([{ type: "BlockRemoved", hashes: [fake.held.get(firstBlock)!] }]);
    fake.held.delete(firstBlock);
    await waitFor("the mirror to see it", async () => engine.kvEventsStatus()!.mirror.reachableTokens === 0);

    const second = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod.";
    const r2 = await postCompletion(node!.apiUrl, { model: "m", prompt: second, max_tokens: 1 });
    expect(r2.status).toBe(200);
    await r2.text();
    const n2 = Math.floor(encode(second).length / BS) * BS;
    await waitFor("the tree to hold only the second prompt", async () => (await tree()) === n2);
    expect(engine.kvEventsStatus()).toMatchObject({ exact: true, accuracy: { requests: 2, exact: 2 } });
  });

  test("events change its tree when they arrive, between runs (no request needed)", async () => {
    const BS = 4;
    const { pub, engine } = await mirroredNode(BS);
    const cluster = async () =>
      (await (await fetch(`${node!.apiUrl}/cluster`)).json()) as { treeTokens: number; served: number };
    await waitFor("the history", async () => engine.kvEventsStatus()!.subscriber.synced);
    expect((await cluster()).treeTokens).toBe(0);

    // Another client of the server (not this node) caches two blocks: the node's tree follows at once.
    await pub.publish([
      {
        type: "BlockStored",
        hashes: [101, 102],
        parent: null,
        tokens: [5, 6, 7, 8, 9, 10, 11, 12],
        blockSize: BS,
      },
    ]);
    await waitFor("the tree to hold the stored blocks", async () => (await cluster()).treeTokens === 8);
    await pub.publish([{ type: "BlockRemoved", hashes: [102] }]);
    await waitFor("the tree to drop the removed block", async () => (await cluster()).treeTokens === 4);
    await pub.publish([{ type: "AllBlocksCleared" }]);
    await waitFor("the tree to empty", async () => (await cluster()).treeTokens === 0);
    expect((await cluster()).served).toBe(0);
  });

  test("/metrics shows the stream and the mirror: counts, blocks held, exact then degraded", async () => {
    const { pub, engine } = await mirroredNode(4);
    const scrape = async () => await (await fetch(`${node!.apiUrl}/metrics`)).text();
    const value = (text: string, series: string): number | undefined => {
      const line = text.split("\n").find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    const mirrorEvent = (e: string) => `prefixmesh_engine_kv_mirror_events_total{event="${e}",node="A"}`;
    await waitFor("the history", async () => engine.kvEventsStatus()!.subscriber.synced);
    const before = await scrape();
    expect(value(before, 'prefixmesh_engine_kv_mirror_exact{node="A"}')).toBe(1);
    expect(value(before, 'prefixmesh_engine_kv_mirror_blocks{node="A"}')).toBe(0);
    expect(value(before, mirrorEvent("stored"))).toBe(0);
    // The history's replay (and an idle probe's, on a slow machine).
    expect(
      value(before, 'prefixmesh_engine_kv_subscriber_events_total{event="replays",node="A"}'),
    ).toBeGreaterThanOrEqual(1);
    expect(before).toContain("# TYPE prefixmesh_engine_kv_subscriber_events_total counter");

    await pub.publish([
      {
        type: "BlockStored",
        hashes: [101, 102],
        parent: null,
        tokens: [5, 6, 7, 8, 9, 10, 11, 12],
        blockSize: 4,
      },
    ]);
    await waitFor(
      "two blocks held",
      async () => value(await scrape(), 'prefixmesh_engine_kv_mirror_blocks{node="A"}') === 2,
    );
    const stored = await scrape();
    expect(value(stored, 'prefixmesh_engine_kv_mirror_reachable_blocks{node="A"}')).toBe(2);
    expect(value(stored, mirrorEvent("stored"))).toBe(2);
    expect(value(stored, mirrorEvent("batches"))).toBe(1);

    // A removal of a block never stored contradicts the mirror: degraded, counted.
    await pub.publish([{ type: "BlockRemoved", hashes: [999] }]);
    await waitFor(
      "degraded",
      async () => value(await scrape(), 'prefixmesh_engine_kv_mirror_exact{node="A"}') === 0,
    );
    expect(value(await scrape(), mirrorEvent("unknown_removals"))).toBe(1);
  });
});
