/**
 * The remote engine with `kvEvents`: a FAKE OpenAI-compatible server (scripted here, no inference)
 * that behaves like vLLM's prefix cache — it reports as cached the whole blocks of the prompt it
 * holds, short of the last token, and publishes the blocks it stores through the KV-event publisher
 * test double. Both on 127.0.0.1.
 */
import { afterEach, describe, expect, test } from "vitest";
import type { NodeInput } from "../../../src/core/node/types.js";
import { OpenAIEngine } from "../../../src/engines/openai/engine.js";
import { watchEngineCache } from "../../../src/server/runtime/engine-cache-watch.js";
import { fakePrefixCachingServer } from "./fake-server.js";
import { type DoubleEvent, type DoubleOptions, KvEventPublisherDouble } from "./publisher-double.js";

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

async function waitFor(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function setup(
  double: DoubleOptions = {},
  server: { dropEventsOf?: Set<number> } = {},
  engineOpts: { retries?: number; settleMs?: number } = {},
  log?: (msg: string, fields: Record<string, unknown>) => void,
) {
  const pub = await KvEventPublisherDouble.start(double);
  open.push(pub);
  const fake = await fakePrefixCachingServer(pub, { blockSize: 4, ...server });
  open.push(fake);
  const url = fake.url;
  const engine = await OpenAIEngine.create(
    {
      baseUrl: url,
      model: "m",
      capacityTokens: 1000,
      ...(engineOpts.retries !== undefined ? { retries: engineOpts.retries } : {}),
      kvEvents: {
        endpoint: pub.endpoint,
        ...(pub.replayEndpoint ? { replayEndpoint: pub.replayEndpoint } : {}),
        topic: "kv-events",
        replayTimeoutMs: 300,
        probeIntervalMs: 60_000,
        settleMs: engineOpts.settleMs ?? 2_000,
      },
    },
    log,
  );
  open.push(engine);
  await pub.subscribed();
  // Without a replay endpoint the history is the first live batch, numbered 0.
  if (pub.replayEndpoint) await waitFor("the history", () => engine.kvEventsStatus()!.subscriber.synced);
  return { pub, engine, fake };
}

const run = (engine: OpenAIEngine, tokens: number[]) =>
  engine.run({ id: "r", tokens: Uint32Array.from(tokens), prompt: tokens.join(" "), maxTokens: 1 });
const seqs = (s: Uint32Array[] | undefined) => (s ?? []).map((x) => Array.from(x).join(",")).sort();
const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

describe("remote engine with KV events", () => {
  test("is engine-managed; results carry the server's cache; the mirror predicts the server's report", async () => {
    const { engine } = await setup();
    expect(engine.info.cacheMode).toBe("engine-managed");
    const r1 = await run(engine, range(1, 10)); // blocks [1..4], [5..8]; token 9 is a partial block
    expect(r1.cachedTokens).toBe(0);
    expect(seqs(r1.cachedSequences)).toEqual([range(1, 9).join(",")]);
    const r2 = await run(engine, range(1, 14)); // hits 8, stores [9..12]
    expect(r2.cachedTokens).toBe(8);
    const r3 = await run(engine, [...range(1, 5), 50, 51, 52, 53, 54]); // hits 4, stores [50..53]
    expect(r3.cachedTokens).toBe(4);
    const r4 = await run(engine, range(1, 13)); // all 12 cached, the last token is computed: reports 8
    expect(r4.cachedTokens).toBe(8);
    expect(seqs(r4.cachedSequences)).toEqual(
      [range(1, 13).join(","), [...range(1, 5), 50, 51, 52, 53].join(",")].sort(),
    );
    const st = engine.kvEventsStatus()!;
    expect(st.exact).toBe(true);
    expect(st.accuracy).toMatchObject({ requests: 4, exact: 4, reportedTokens: 20, absErrorTokens: 0 });
  });

  test("while degraded, results add the LRU model's sequences and predictions stop", async () => {
    const { engine } = await setup({ bufferSteps: 1 }, { dropEventsOf: new Set([0]) });
    const r1 = await run(engine, range(1, 9)); // its events are lost
    // Nothing has revealed the loss yet: the mirror is still exact, and (wrongly) empty.
    expect(r1.cachedSequences).toEqual([]);
    await run(engine, range(100, 105)); // its batch shows the gap; the buffer no longer has batch 0
    await waitFor("degraded", () => engine.kvEventsStatus()!.degraded !== undefined);
    const st = engine.kvEventsStatus()!;
    expect(st.exact).toBe(false);
    expect(st.degraded).toMatch(/lost batches 0–0/);
    const r3 = await run(engine, range(1, 9));
    expect(r3.cachedTokens).toBe(4); // the server had it all along
    expect(seqs(r3.cachedSequences)).toEqual(
      [range(1, 9).join(","), range(100, 104).join(","), range(100, 105).join(",")].sort(),
    );
    expect(engine.kvEventsStatus()!.accuracy.unpredicted).toBe(1);
  });

  test("a server restart seen only as a gap: what the old server held is advertised no more", async () => {
    const { pub, engine, fake } = await setup({ replay: "none" });
    await run(engine, range(1, 10)); // batch 0: blocks [1..4], [5..8]
    // Another client of the same server caches a prefix this node never ran (batch 1).
    await pub.publish([
      { type: "BlockStored", hashes: [900], parent: null, tokens: range(500, 504), blockSize: 4 },
    ]);
    await waitFor("batch 1", () => engine.kvEventsStatus()!.subscriber.nextSequence === 2);
    expect(seqs(engine.cachedSequences())).toContain(range(500, 504).join(","));
    // The server restarts, its cache empty; its first batches are lost while the node reconnects.
    fake.held.clear();
    pub.restart();
    for (let i = 0; i < 3; i++) await pub.publish([], { drop: true });
    await run(engine, range(200, 205)); // batch 3: a gap no replay can explain
    await waitFor("degraded", () => engine.kvEventsStatus()!.degraded !== undefined);
    const st = engine.kvEventsStatus()!;
    expect(st.degraded).toMatch(/lost batches 2–2: there is no replay endpoint/);
    expect(st.mirror.reachableBlocks).toBe(1);
    // What /cluster shows under engineCache: why the mirror is not exact, and what it forgot.
    expect(JSON.parse(JSON.stringify(engine.cacheStatus()))).toMatchObject({
      mode: "kv-events",
      kvEvents: { exact: false, degraded: st.degraded, mirror: { counters: { forgotten: 3 } } },
    });
    // Not the other client's prefix (no removal of it would ever come); this node's own runs stay
    // as the LRU model's guess, which ages them out as any guess.
    expect(seqs(engine.cachedSequences())).toEqual(
      [range(1, 10).join(","), range(200, 204).join(","), range(200, 205).join(",")].sort(),
    );
  });

  test("the mirror's transitions are logged, one line each: degraded, forgot, exact again", async () => {
    const lines: { msg: string; fields: Record<string, unknown> }[] = [];
    const { pub, engine } = await setup({ replay: "none" }, {}, {}, (msg, fields) => {
      // The engine's other lines (no context limit reported, …) are not the mirror's.
      if (msg.startsWith("KV-event mirror")) lines.push({ msg, fields });
    });
    const store = (hash: number, tokens: number[]): DoubleEvent => ({
      type: "BlockStored",
      hashes: [hash],
      parent: null,
      tokens,
      blockSize: 4,
    });
    const applied = (n: number) => () => engine.kvEventsStatus()!.subscriber.nextSequence === n;
    await pub.publish([store(1, range(1, 5))]); // batch 0: the history
    await waitFor("batch 0", applied(1));
    await pub.publish([], { drop: true }); // batch 1 lost
    await pub.publish([store(2, range(5, 9))]); // batch 2 shows the gap: block 1 is forgotten
    await waitFor("batch 2", applied(3));
    await pub.publish([store(3, range(9, 13))]); // batch 3: applied, nothing to log
    await pub.publish([], { drop: true }); // batch 4 lost
    await pub.publish([]); // batch 5: blocks 2 and 3 forgotten; already degraded
    await waitFor("batch 5", applied(6));
    expect(lines).toEqual([
      {
        msg: expect.stringMatching(/^KV-event mirror degraded/),
        fields: { reason: expect.stringMatching(/lost batches 1–1/), forgottenBlocks: 1 },
      },
      {
        msg: "KV-event mirror forgot the blocks it held",
        fields: { reason: expect.stringMatching(/lost batches 4–4/), blocks: 2 },
      },
    ]);
    await pub.publish([{ type: "AllBlocksCleared" }]);
    await waitFor("exact", () => engine.kvEventsStatus()!.exact);
    await waitFor("the exact line", () => lines.length === 3);
    expect(lines[2]).toEqual({ msg: "KV-event mirror exact again", fields: {} });
    // Further batches are no transitions.
    await pub.publish([store(4, range(1, 5))]);
    await waitFor("batch 7", applied(8));
    expect(lines).toHaveLength(3);
  });

  test("options are validated: a malformed endpoint is refused before anything connects", async () => {
    await expect(
      OpenAIEngine.create({
        baseUrl: "http://127.0.0.1:1",
        model: "m",
        kvEvents: { endpoint: "http://x:1" },
      }),
    ).rejects.toThrow(/tcp:\/\/HOST:PORT/);
    expect(
      () =>
        new OpenAIEngine({ baseUrl: "http://127.0.0.1:1", model: "m", kvEvents: { endpoint: "tcp://a:1" } }),
    ).toThrow(/OpenAIEngine.create/);
  });

  test("a server found down stops advertising its cache, kept; it is offered again once it answers", async () => {
    const { engine, fake } = await setup({}, {}, { retries: 0 });
    const r1 = await run(engine, range(1, 10));
    const held = [range(1, 9).join(",")];
    expect(seqs(r1.cachedSequences)).toEqual(held);
    const fed: Uint32Array[][] = [];
    const unwatch = watchEngineCache(engine, (i: NodeInput) => {
      if (i.type === "engine-cache-changed") fed.push(i.sequences);
    });
    open.push({ close: async () => unwatch() });
    fake.healthy = false;
    expect((await engine.health()).ok).toBe(false);
    // Peers must stop forwarding here: the node's tree (and its next snapshot) gets an empty cache.
    expect(engine.cachedSequences()).toEqual([]);
    expect(engine.cacheStatus().withheld).toMatch(/unreachable/);
    await waitFor("the empty cache fed to the node", () => fed.length === 1);
    expect(fed[0]).toEqual([]);
    // The mirror itself is kept: nothing said the engine lost it.
    expect(engine.kvEventsStatus()!.mirror.reachableBlocks).toBe(2);
    fake.healthy = true;
    expect((await engine.health()).ok).toBe(true);
    expect(engine.cacheStatus().withheld).toBeUndefined();
    expect(seqs(engine.cachedSequences())).toEqual(held);
    await waitFor("the cache fed again", () => fed.length === 2);
    expect(seqs(fed[1])).toEqual(held);
  });

  test("a run that succeeds while the cache is withheld offers it again", async () => {
    const { engine, fake } = await setup({}, {}, { retries: 0 });
    await run(engine, range(1, 10));
    fake.healthy = false;
    await engine.health();
    expect(engine.cachedSequences()).toEqual([]);
    const r = await run(engine, range(1, 14)); // /health is not /v1/completions: the server answers
    expect(r.cachedTokens).toBe(8);
    expect(seqs(engine.cachedSequences())).toEqual([range(1, 13).join(",")]);
  });

  test("a run waiting for its blocks' events when the engine closes is answered at once", async () => {
    // Its events never come live (buffered for replay only, and no probe runs): the settle wait
    // would last its whole bound, for events a closed subscriber can no longer bring.
    const { engine } = await setup({}, { dropEventsOf: new Set([0]) }, { settleMs: 10_000 });
    const r = run(engine, range(1, 10));
    await waitFor("the run's settle wait", () => engine.kvEventsStatus()!.accuracy.requests === 1);
    const t0 = Date.now();
    await engine.close();
    const result = await r;
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(result.text).toBe("ok");
    await expect(run(engine, range(1, 10))).rejects.toThrow(/closed/);
  });
});
