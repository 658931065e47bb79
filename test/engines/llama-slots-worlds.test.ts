/**
 * The slot mirror's worlds (src/engines/llama-slots/worlds.ts): a run's end can reach the node after
 * the start of another run that the server began once the first had ended (two responses, two server
 * threads). The server then saved the ended slot to its RAM cache at that start; the node, going by
 * arrival order, thought it still busy. The case below is the one a loaded machine produced against
 * the real llama-server: the saved prompt, which the node never mirrored, was later restored for
 * another tenant.
 */
import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { EngineAbortedError } from "../../src/engines/errors.js";
import { HttpClient } from "../../src/engines/http-client.js";
import { LlamaSlotsOptionsSchema } from "../../src/engines/llama-slots/options.js";
import { LlamaSlotCache } from "../../src/engines/llama-slots/slot-cache.js";
import { SlotMirror } from "../../src/engines/llama-slots/slot-mirror.js";
import { MAX_WORLDS, MirrorWorlds } from "../../src/engines/llama-slots/worlds.js";
import { waitFor } from "../e2e/helpers.js";
import { closeDouble } from "./server-double.js";
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

  it("replays a start on the worlds before it when an end came in after two later starts", () => {
    const worlds = new MirrorWorlds(new SlotMirror(SLOT_SERVER));
    const x = range(1, 100);
    const y = range(5000, 100);
    const z = cat(range(1, 80), range(9000, 20));
    worlds.launch(1, (m) => m.launch(1, x, [0, 1]));
    worlds.launch(0, (m) => m.launch(0, y, [0]));
    worlds.each((m) => m.finish(0, y, [], 100));
    expect(worlds.report(0, 0)).toBe(true);
    const beforeZ = worlds.save();
    expect(worlds.launch(0, (m) => m.launch(0, z, [0]))).toBe(0);
    // x's end comes in only now, though the server ended x before y's start and saved it then: z,
    // replacing y in slot 0, had x restored from the RAM cache.
    worlds.each((m) => m.finish(1, x, [], 100));
    expect(worlds.report(1, 0)).toBe(true);
    worlds.forkBefore(
      beforeZ,
      (m) => {
        m.finish(1, x, [], 100);
        m.idleSaved(1);
      },
      { slot: 0, launch: (m) => m.launch(0, z, [0, 1]) },
      [],
    );
    expect(worlds.size).toBe(2);
    expect(worlds.report(0, 80)).toBe(true);
    expect(worlds.size).toBe(1);
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

let double: Server | undefined;
afterEach(async () => {
  await closeDouble(double);
  double = undefined;
});

/**
 * A TEST DOUBLE of llama-server's two slots whose timeline the test writes: each `/completion` gets
 * its headers at once (the real server sends them early in the prefill); its first and final events
 * come when the test says, with the `cache_n` the test says the server computed.
 */
async function timelineDouble() {
  const runs: { slot: number; res: ServerResponse; body: { cache_prompt: boolean }; at: number }[] = [];
  /** What `/slots` says, and whether the next `/completion` is refused before it starts (HTTP 400). */
  const server = {
    slots: [
      { id: 0, is_processing: false },
      { id: 1, is_processing: false },
    ] as object[],
    refuseNext: false as boolean | "held",
    /** A refusal held back ("held") until `refuse` sends it. */
    held: undefined as ServerResponse | undefined,
  };
  double = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => {
      body += d;
    });
    req.on("end", () => {
      const json = (o: unknown) =>
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(o));
      if (req.url === "/props")
        return json({ total_slots: 2, endpoint_slots: true, default_generation_settings: { n_ctx: 2048 } });
      if (req.url === "/slots") return json(server.slots);
      if (server.refuseNext === "held") {
        server.refuseNext = false;
        server.held = res;
        return;
      }
      if (server.refuseNext) {
        server.refuseNext = false;
        return res.writeHead(400, { "content-type": "application/json" }).end('{"error":"refused"}');
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
      const parsed = JSON.parse(body) as { id_slot: number; cache_prompt: boolean };
      runs.push({ slot: parsed.id_slot, res, body: parsed, at: performance.now() });
    });
  });
  await new Promise<void>((r) => double!.listen(0, "127.0.0.1", r));
  const http = new HttpClient(`http://127.0.0.1:${(double!.address() as AddressInfo).port}`, {
    connectTimeoutMs: 5_000,
    headersTimeoutMs: 30_000,
    bodyTimeoutMs: 30_000,
    retries: 0,
    backoffMs: 5,
    maxBackoffMs: 10,
  });
  const cache = await LlamaSlotCache.detect(http, LlamaSlotsOptionsSchema.parse({}));
  if (!cache) throw new Error("the double is not taken for a llama-server");
  const event = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
  return {
    cache,
    server,
    /** Waits for the held-back request, then refuses it. */
    async refuse(): Promise<void> {
      await waitFor(() => server.held !== undefined, 10_000, "the refused run to reach the double");
      server.held!.writeHead(400, { "content-type": "application/json" }).end('{"error":"refused"}');
      server.held = undefined;
    },
    /** The request body of the n-th run. */
    body: (n: number) => runs[n]!.body,
    /** Waits for the n-th run (from 0) to reach the server; its slot. */
    async arrived(n: number): Promise<number> {
      await waitFor(() => runs.length > n, 10_000, `run ${n} to reach the double`);
      return runs[n]!.slot;
    },
    /** When the n-th run reached the double (the node's clock: the same process). */
    arrivedAt: (n: number) => runs[n]!.at,
    first(n: number, promptMs = 0) {
      runs[n]!.res.write(event({ content: "x", tokens: [7], timings: { prompt_ms: promptMs } }));
    },
    /** The run ends: the slot holds its prompt (the one token generated is not evaluated). */
    end(n: number, cacheN: number, promptTokens: number, promptMs = 0) {
      const final = {
        content: "",
        tokens: [],
        stop: true,
        tokens_predicted: 1,
        tokens_cached: promptTokens,
        timings: { cache_n: cacheN, prompt_ms: promptMs, predicted_ms: 0 },
      };
      runs[n]!.res.end(event(final));
    },
  };
}

describe("the slot mirror's worlds against a server timeline", () => {
  it.each([
    ["takes a run as started at its first event, not its headers: an end between the two came first", 0, 1],
    // The server on another machine, its clock ticking 0.1% fast: over seconds its durations exceed
    // the node's by more than rounding, and taken at face value they would put q's end after s's start.
    [
      "allows for a server clock a little faster than the node's: an order its times seem to rule out",
      5_000,
      1 + 1e-3,
    ],
  ])(
    "%s",
    async (_, spanMs, fast) => {
      const d = await timelineDouble();
      const q = range(1, 100);
      const s = range(5000, 100);
      const r = cat(range(1, 60), range(7000, 40));
      const w = cat(q, range(8000, 20));
      // The timeline's own length, not a wait for a condition.
      const span = () => new Promise((r) => setTimeout(r, spanMs));
      const run = (id: string, tokens: Uint32Array) => d.cache.run({ id, tokens, maxTokens: 1 }, {});
      const qRun = run("q", q);
      expect(await d.arrived(0)).toBe(0);
      d.first(0);
      await span();
      const sRun = run("s", s);
      expect(await d.arrived(1)).toBe(1);
      // The server released q's slot just before it started s (so saved q to its RAM cache then), and
      // q's end reached the node after s's headers but before s's first event; the times the server
      // reports are what its own clock measured.
      d.end(0, 0, q.length, (d.arrivedAt(1) - d.arrivedAt(0)) * fast);
      await qRun;
      await span();
      d.first(1, (performance.now() - d.arrivedAt(1)) * fast);
      d.end(1, 0, s.length);
      await sRun;
      // r keeps most of q in slot 0 (no RAM-cache change): q is left only in the RAM cache.
      const rRun = run("r", r);
      expect(await d.arrived(2)).toBe(0);
      d.first(2);
      // w, on slot 1 (holding s), gets q restored from the RAM cache: all of q cached.
      const wRun = run("w", w);
      expect(await d.arrived(3)).toBe(1);
      d.first(3);
      d.end(3, q.length, w.length);
      expect((await wRun).cachePrediction).toMatchObject({ predicted: q.length, reported: q.length });
      d.end(2, 60, r.length);
      expect((await rRun).cachePrediction).toMatchObject({ predicted: 60, reported: 60 });
    },
    20_000,
  );

  it("keeps one order where the server's times allow only one: the end came after the start", async () => {
    const d = await timelineDouble();
    const run = (id: string, tokens: Uint32Array) => d.cache.run({ id, tokens, maxTokens: 1 }, {});
    const qRun = run("q", range(1, 100));
    await d.arrived(0);
    d.first(0);
    const sRun = run("s", range(5000, 100));
    await d.arrived(1);
    d.first(1);
    // q's end comes in after s began; the server spent longer on q's prompt than has passed since q
    // was sent, so q was still running when s started: no idle save of q to consider.
    d.end(0, 0, 100, 3_600_000);
    await qRun;
    expect(d.cache.status().worlds).toMatchObject({ now: 1, forks: 0 });
    d.end(1, 0, 100);
    await sRun;
  });

  it.each([
    ["before", false],
    ["while that start waited for its response", true],
  ])(
    "keeps the order of an earlier start when a later start never reached the server (end %s)",
    async (_, during) => {
      const d = await timelineDouble();
      const q = range(1, 100);
      const s = range(5000, 100);
      const r = cat(range(1, 60), range(7000, 40));
      const w = cat(q, range(8000, 20));
      const run = (id: string, tokens: Uint32Array, salt: string) =>
        d.cache.run({ id, tokens, maxTokens: 1, cacheSalt: salt }, {});
      // B's q runs on slot 0; A's s starts on slot 1 and ends, q still running.
      const qRun = run("q", q, "tenant-b");
      expect(await d.arrived(0)).toBe(0);
      d.first(0);
      const sRun = run("s", s, "tenant-a");
      expect(await d.arrived(1)).toBe(1);
      d.first(1);
      d.end(1, 0, s.length);
      await sRun;
      // A start the server refuses (it never began), then q's end: the server may have ended q before
      // s started, and saved it to its RAM cache then.
      d.server.refuseNext = during ? "held" : true;
      const fRun = run("f", range(9000, 10), "tenant-a");
      fRun.catch(() => {});
      if (during) {
        // q's end comes in while the start waits for its refusal.
        await waitFor(() => d.server.held !== undefined, 10_000, "the refused run to reach the double");
        d.end(0, 0, q.length);
        await qRun;
        await d.refuse();
        await expect(fRun).rejects.toThrow();
      } else {
        await expect(fRun).rejects.toThrow();
        d.end(0, 0, q.length);
        await qRun;
      }
      d.server.slots = [
        { id: 0, id_task: 0, is_processing: false, n_prompt_tokens: q.length },
        { id: 1, id_task: 1, is_processing: false, n_prompt_tokens: s.length },
      ];
      // B's r keeps most of q in slot 0 (no RAM-cache change): q is left only in the RAM cache, if there.
      const rRun = run("r", r, "tenant-b");
      expect(await d.arrived(2)).toBe(0);
      d.first(2);
      d.end(2, 60, r.length);
      await rRun;
      // A's w on slot 1 (A's s): had q been saved at s's start, the server restores B's q there for it.
      const wRun = run("w", w, "tenant-a");
      expect(await d.arrived(3)).toBe(1);
      expect(d.body(3).cache_prompt).toBe(false);
      d.first(3);
      d.end(3, 0, w.length);
      await wRun;
    },
  );
});

describe("the launch lock under a long prefill", () => {
  it("reports a waiting run's abort at once, not after the other start's first event", async () => {
    const d = await timelineDouble();
    // q holds the launch lock: its headers came, its first event (after its prefill) has not.
    const qRun = d.cache.run({ id: "q", tokens: range(1, 100), maxTokens: 1 }, {});
    expect(await d.arrived(0)).toBe(0);
    const ac = new AbortController();
    let settled: unknown;
    const sRun = d.cache.run({ id: "s", tokens: range(5000, 100), maxTokens: 1 }, {}, undefined, ac.signal);
    sRun.catch((e: unknown) => {
      settled = e;
    });
    ac.abort();
    await waitFor(() => settled !== undefined, 5_000, "the waiting run's abort to be reported");
    expect(settled).toBeInstanceOf(EngineAbortedError);
    // The lock passes on: q's next start goes once q began.
    d.first(0);
    const rRun = d.cache.run({ id: "r", tokens: range(9000, 100), maxTokens: 1 }, {});
    expect(await d.arrived(1)).toBe(1);
    d.first(1);
    d.end(1, 0, 100);
    await rRun;
    d.end(0, 0, 100);
    await qRun;
  }, 30_000);
});
