/**
 * The slot mirror against the real llama.cpp server: every predicted cached-token count must equal
 * the server's `cache_n`, with the RAM prompt cache on (the server's default) and off, sequentially
 * and with both slots busy; after an abort and after a server restart, `GET /slots` resynchronizes.
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { EngineRequest } from "../../src/core/engine.js";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { type LlamaServer, llamaServerSkip, MODEL, startLlamaServer } from "./llama-server.js";

const skip = llamaServerSkip() !== undefined;

let seq = 0;
/** A prompt of token ids (the model's vocabulary is 512): a shared prefix by group, then its own part. */
function prompt(group: number, own: number, prefix = 60, ownLen = 12): Uint32Array {
  const out = new Uint32Array(1 + prefix + ownLen);
  out[0] = 1; // BOS, as the server's /tokenize adds it
  for (let i = 0; i < prefix; i++) out[1 + i] = 3 + ((group * 97 + i * 13) % 500);
  for (let i = 0; i < ownLen; i++) out[1 + prefix + i] = 3 + ((own * 31 + i * 7 + group) % 500);
  return out;
}
const req = (tokens: Uint32Array, maxTokens = 3): EngineRequest => ({
  id: `r${++seq}`,
  tokens,
  maxTokens,
  temperature: 0,
});

let server: LlamaServer | undefined;
let engine: OpenAIEngine | undefined;
afterEach(async () => {
  await engine?.close();
  await server?.stop();
  engine = undefined;
  server = undefined;
});

async function start(
  args: string[] = [],
  port?: number,
  cacheRamMiB?: number,
  savedSlots?: number,
  slots = 2,
) {
  server = await startLlamaServer({ slots, contextTokens: 512 * slots, args, ...(port ? { port } : {}) });
  engine = await OpenAIEngine.create({
    baseUrl: server.url,
    model: MODEL,
    retries: 0,
    llamaSlots: {
      ...(cacheRamMiB !== undefined ? { cacheRamMiB } : {}),
      ...(savedSlots !== undefined ? { savedSlots } : {}),
    },
  });
  return engine;
}

/** A mixed schedule: groups interleaved (RAM round trips), repeats (the last-token rule), extensions. */
function schedule(): Uint32Array[] {
  const out: Uint32Array[] = [];
  for (let round = 0; round < 4; round++)
    for (let g = 0; g < 3; g++) out.push(prompt(g, round), prompt(g, round));
  out.push(prompt(7, 0, 10, 3), prompt(8, 0, 150, 20), prompt(7, 1, 10, 3));
  return out;
}

describe.skipIf(skip)("the slot mirror against the real llama.cpp server", () => {
  it.each([
    ["the RAM prompt cache on (the default)", [], undefined],
    ["--cache-ram 0", ["--cache-ram", "0"], 0],
  ] as const)(
    "predicts every cache_n exactly, one request at a time: %s",
    async (_, args, ram) => {
      const e = await start([...args], undefined, ram);
      expect(e.cacheStatus().mode).toBe("llama-slots");
      expect(e.info.cacheMode).toBe("engine-managed");
      let cachedSomething = false;
      for (const tokens of schedule()) {
        const r = await e.run(req(tokens));
        expect(r.cachePrediction?.predicted, `request ${seq}`).toBe(r.cachePrediction?.reported);
        if (r.cachedTokens > 0) cachedSomething = true;
        // The node's tree gets what the server holds: the prompt just run is in it.
        expect(r.cachedSequences?.some((s) => s.length >= tokens.length - 1)).toBe(true);
      }
      expect(cachedSomething).toBe(true);
      const acc = e.cacheStatus().accuracy;
      expect(acc.requests).toBe(schedule().length);
      expect(acc.exact).toBe(acc.requests);
    },
    120_000,
  );

  it("predicts every cache_n exactly with both slots busy", async () => {
    const e = await start();
    const all = schedule();
    for (let i = 0; i < all.length; i += 4)
      await Promise.all(all.slice(i, i + 4).map((t) => e.run(req(t, 6))));
    const acc = e.cacheStatus().accuracy;
    expect(acc.requests).toBe(all.length);
    expect(acc.exact).toBe(acc.requests);
  }, 120_000);

  it("resynchronizes from GET /slots after an aborted run", async () => {
    const e = await start();
    const p = prompt(1, 1, 200, 10);
    const ac = new AbortController();
    let chunks = 0;
    await expect(
      e.run(
        req(p, 250),
        () => {
          if (++chunks === 2) ac.abort();
        },
        ac.signal,
      ),
    ).rejects.toThrow();
    // The slot now holds the prompt and an unknown part of the output: /slots says how much.
    const again = await e.run(req(p));
    expect(again.cachePrediction?.predicted).toBe(again.cachePrediction?.reported);
    expect(again.cachedTokens).toBe(p.length - 1);
    expect(e.cacheStatus().llamaSlots?.resyncs).toBeGreaterThanOrEqual(2);
  }, 120_000);

  it("reads GET /slots back before an abort is reported: the tree gets what the server kept", async () => {
    const e = await start();
    const p = prompt(3, 1, 200, 10);
    const ac = new AbortController();
    let chunks = 0;
    const resyncs = e.cacheStatus().llamaSlots?.resyncs ?? 0;
    const aborted = e.run(
      req(p, 250),
      () => {
        if (++chunks === 3) ac.abort();
      },
      ac.signal,
    );
    await expect(aborted).rejects.toThrow();
    // At the rejection, as engine-runs.ts reads it for the node's tree: the mirror is the server's.
    const mirrored = e.cacheStatus().llamaSlots;
    const sequences = e.cachedSequences();
    expect(mirrored?.resyncs).toBeGreaterThan(resyncs);
    const slots = (await (await fetch(`${server!.url}/slots`)).json()) as {
      id: number;
      is_processing: boolean;
      n_prompt_tokens?: number;
    }[];
    const ran = slots.find((s) => (s.n_prompt_tokens ?? 0) > 0);
    expect(ran?.is_processing).toBe(false);
    // The server kept the prompt and some output; the launch's guess was the prompt alone.
    expect(ran?.n_prompt_tokens).toBeGreaterThan(p.length);
    expect(mirrored?.slotTokens[ran!.id]).toBe(ran?.n_prompt_tokens);
    expect(
      sequences.some((s) => s.length >= p.length && s.subarray(0, p.length).every((t, i) => t === p[i])),
    ).toBe(true);
    // Read back already: the next run needs no read of its own, and its prediction holds.
    const again = await e.run(req(p));
    expect(e.cacheStatus().llamaSlots?.resyncs).toBe(mirrored?.resyncs);
    expect(again.cachePrediction?.predicted).toBe(again.cachePrediction?.reported);
  }, 120_000);

  it("finds a restarted server's empty cache from GET /slots", async () => {
    const e = await start();
    const port = Number(new URL(server!.url).port);
    const p = prompt(2, 2, 100, 10);
    await e.run(req(p));
    const before = await e.run(req(p));
    expect(before.cachedTokens).toBe(p.length - 1);
    await server!.stop();
    await expect(e.run(req(p))).rejects.toThrow();
    server = await startLlamaServer({ slots: 2, contextTokens: 1024, port });
    const after = await e.run(req(p));
    expect(after.cachePrediction).toMatchObject({ predicted: 0, reported: 0 });
    expect(e.cacheStatus().llamaSlots?.restarts).toBe(1);
  }, 180_000);

  it("saves a slot it is about to overwrite to --slot-save-path, and restores it for its prefix", async () => {
    const dir = mkdtempSync(join(tmpdir(), "prefixmesh-slot-saves-"));
    try {
      // One slot and no RAM cache: only the saved states can bring a prefix back.
      const e = await start(["--slot-save-path", dir, "--cache-ram", "0"], undefined, 0, 2, 1);
      const a = prompt(0, 0, 100, 10);
      const b = prompt(1, 0, 100, 10);
      await e.run(req(a));
      await e.run(req(b)); // overwrites a: a is saved first
      const again = await e.run(req(prompt(0, 1, 100, 10))); // a's prefix, restored from disk
      expect(again.cachedTokens).toBeGreaterThanOrEqual(101);
      expect(again.cachePrediction?.predicted).toBe(again.cachePrediction?.reported);
      const status = e.cacheStatus().llamaSlots!.savedSlots;
      expect(status).toMatchObject({ enabled: true, restores: 1 });
      expect(status.saves).toBeGreaterThanOrEqual(2);
      // A fixed set of file names: never more files than states.
      expect(readdirSync(dir).length).toBeLessThanOrEqual(2);
      // The saved states are part of what the node's tree holds.
      const seqs = again.cachedSequences ?? [];
      expect(seqs.some((s) => s[1] === b[1] && s.length >= b.length)).toBe(true);
      expect(e.cacheStatus().accuracy.exact).toBe(3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it("turns slot saving off when the server has no --slot-save-path, and still serves", async () => {
    const e = await start([], undefined, undefined, 2, 1);
    await e.run(req(prompt(0, 0)));
    const r = await e.run(req(prompt(1, 0)));
    expect(r.text.length).toBeGreaterThanOrEqual(0);
    const status = e.cacheStatus().llamaSlots!.savedSlots;
    expect(status.enabled).toBe(false);
    expect(status.off).toMatch(/slot-save-path/);
  }, 120_000);

  it("finds from the runs that the server's RAM prompt cache is off when the node was not told", async () => {
    const e = await start(["--cache-ram", "0"]); // the node assumes llama-server's default (8192 MiB)
    const runs: Uint32Array[] = [];
    for (let round = 0; round < 12; round++) for (let g = 0; g < 3; g++) runs.push(prompt(g, round));
    const outcomes: boolean[] = [];
    for (const t of runs) {
      const r = await e.run(req(t));
      outcomes.push(r.cachePrediction?.predicted === r.cachePrediction?.reported);
    }
    const status = e.cacheStatus().llamaSlots!;
    expect(status.calibrated).toMatch(/looks off/);
    // Once calibrated, the mirror is the server's again.
    expect(outcomes.slice(-8).every(Boolean)).toBe(true);
  }, 120_000);

  it("finds a restart it did not see fail from the next run's surprise, keeping the slot it just ran", async () => {
    server = await startLlamaServer({ slots: 2, contextTokens: 1024 });
    const port = Number(new URL(server.url).port);
    // Retries: the pooled connections to the old server are dead after the restart.
    const e = await OpenAIEngine.create({ baseUrl: server.url, model: MODEL, retries: 2, backoffMs: 10 });
    engine = e;
    const a = prompt(3, 3, 100, 10);
    const b = prompt(4, 4, 100, 10);
    await e.run(req(a));
    await e.run(req(b));
    await server.stop();
    server = await startLlamaServer({ slots: 2, contextTokens: 1024, port });
    const surprised = await e.run(req(a)); // the mirror expects a cached: the new server has nothing
    expect(surprised.cachePrediction?.reported).toBe(0);
    expect(surprised.cachePrediction?.predicted).toBeGreaterThan(0);
    const next = await e.run(req(a)); // resync: a restart; the slot that ran a is kept
    expect(e.cacheStatus().llamaSlots?.restarts).toBe(1);
    expect(next.cachePrediction).toMatchObject({ predicted: a.length - 1, reported: a.length - 1 });
    const other = await e.run(req(b)); // the RAM cache the mirror had is gone with the restart
    expect(other.cachePrediction?.predicted).toBe(other.cachePrediction?.reported);
  }, 180_000);
});
