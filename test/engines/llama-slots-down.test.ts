/**
 * A llama-server found down by the engine's health check, against a TEST DOUBLE of its API (`/props`,
 * `/slots`, `/tokenize`, `/health`, a `/completion` that ends at once; 127.0.0.1 only, no inference):
 * while down, the slot mirror is kept but not advertised; once the server answers, `/slots` is read
 * before it is offered again, so a restart clears it without waiting for a run's surprise.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { closedAfterEach } from "./server-double.js";
import { range, type SlotJson } from "./slot-fixtures.js";

const live = closedAfterEach<OpenAIEngine>();

async function start() {
  const state = {
    healthy: true,
    slotsUp: true,
    slots: [{ id: 0, is_processing: false }] as SlotJson[],
    slotReads: 0,
  };
  live.double = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const json = (o: unknown, status = 200) =>
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(o));
      if (req.url === "/health") return json({}, state.healthy ? 200 : 503);
      if (req.url === "/props")
        return json({ total_slots: 1, endpoint_slots: true, default_generation_settings: { n_ctx: 512 } });
      if (req.url === "/slots") {
        state.slotReads++;
        return state.slotsUp ? json(state.slots) : json({ error: "loading" }, 503);
      }
      if (req.url === "/tokenize") return json({ tokens: [1, 2] });
      if (req.url === "/completion") {
        res.writeHead(200, { "content-type": "text/event-stream" });
        const final = { content: "b", tokens: [8], stop: true, tokens_predicted: 1, timings: { cache_n: 0 } };
        return void res.end(`data: ${JSON.stringify(final)}\n\n`);
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => live.double!.listen(0, "127.0.0.1", r));
  live.engine = await OpenAIEngine.create({
    baseUrl: `http://127.0.0.1:${(live.double!.address() as AddressInfo).port}`,
    model: "m",
    retries: 0,
    llamaSlots: { cacheRamMiB: 0 },
  });
  expect(live.engine.cacheStatus().mode).toBe("llama-slots");
  const tokens = range(1, 15);
  await live.engine.run({ id: "r1", tokens, maxTokens: 1, temperature: 0 });
  // What the server says after that run: slot 0 ran task 0 and holds the prompt.
  state.slots = [{ id: 0, is_processing: false, id_task: 0, n_prompt_tokens: tokens.length }];
  expect(live.engine.cachedSequences().length).toBe(1);
  return { e: live.engine, state };
}

describe("llama-server found down by the health check", () => {
  it("withholds the slots while down, then reads /slots: a restart found there clears them", async () => {
    const { e, state } = await start();
    state.healthy = false;
    expect((await e.health()).ok).toBe(false);
    expect(e.cachedSequences()).toEqual([]);
    expect(e.cacheStatus().withheld).toMatch(/unreachable/);
    // A new server: its slot never ran a task.
    state.slots = [{ id: 0, is_processing: false }];
    state.healthy = true;
    const reads = state.slotReads;
    expect((await e.health()).ok).toBe(true);
    expect(state.slotReads).toBe(reads + 1);
    expect(e.cacheStatus().withheld).toBeUndefined();
    expect(e.cacheStatus().llamaSlots?.restarts).toBe(1);
    expect(e.cachedSequences()).toEqual([]);
  });

  it("offers the slots again when the server that answers is the same one", async () => {
    const { e, state } = await start();
    const before = e.cachedSequences();
    state.healthy = false;
    await e.health();
    expect(e.cachedSequences()).toEqual([]);
    state.healthy = true;
    await e.health();
    expect(e.cacheStatus().llamaSlots?.restarts).toBe(0);
    expect(e.cachedSequences()).toEqual(before);
  });

  it("keeps withholding while /slots cannot be read after /health answers", async () => {
    const { e, state } = await start();
    state.healthy = false;
    await e.health();
    state.healthy = true;
    state.slotsUp = false;
    await e.health();
    expect(e.cacheStatus().withheld).toMatch(/unreachable/);
    expect(e.cachedSequences()).toEqual([]);
  });
});
