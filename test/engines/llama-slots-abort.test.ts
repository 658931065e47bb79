/**
 * An aborted run on the llama-server slot mirror, against a TEST DOUBLE of llama-server's slot API
 * (`/props`, `/slots`, a `/completion` stream that stops after one token; 127.0.0.1 only, no inference): the
 * abort reads `GET /slots` back before it is reported, so the sequences the node's tree takes with
 * the abort (engine-runs.ts) are what the server kept, not the guess made at launch. The real server:
 * llama-slots-real.test.ts.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { EngineAbortedError } from "../../src/engines/errors.js";
import { HttpClient } from "../../src/engines/http-client.js";
import { LlamaSlotsOptionsSchema } from "../../src/engines/llama-slots/options.js";
import { LlamaSlotCache } from "../../src/engines/llama-slots/slot-cache.js";
import { waitFor } from "../e2e/helpers.js";
import { closeDouble } from "./server-double.js";
import { range, type SlotJson } from "./slot-fixtures.js";

let double: Server | undefined;
afterEach(async () => {
  await closeDouble(double);
  double = undefined;
});

/**
 * One slot. `/slots` answers the reads in turn (the last one again once they run out), after the
 * engine's own first one; the first `/completion` streams one token and then says nothing (until the
 * client goes), later ones end at once. Whatever the server keeps is what the reads say: here less
 * than the prompt the mirror assumed at launch (as after a context shift), so the two differ.
 */
async function startDouble(
  afterAbort: SlotJson[][] | "held",
  /** The engine's bound on a silent server (its headers and body timeouts). */
  boundMs = 30_000,
) {
  const seen: string[] = [];
  let completions = 0;
  // Held: the slot reads busy until the test calls `release` (a long prefill the server has not
  // ended yet), however slow the machine.
  const held = afterAbort === "held";
  let released = false;
  const reads: SlotJson[][] = [[{ id: 0, is_processing: false }], ...(held ? [] : afterAbort)];
  const heldRead = (): SlotJson[] =>
    released
      ? [{ id: 0, is_processing: false, id_task: 0, n_prompt_tokens: 16 }]
      : [{ id: 0, is_processing: true, id_task: 0 }];
  double = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      seen.push(`${req.method} ${req.url}`);
      const json = (o: unknown) =>
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(o));
      if (req.url === "/props")
        return json({ total_slots: 1, endpoint_slots: true, default_generation_settings: { n_ctx: 512 } });
      if (req.url === "/slots")
        return json(held && reads.length === 1 ? heldRead() : reads.length > 1 ? reads.shift() : reads[0]);
      if (req.url === "/completion") {
        res.writeHead(200, { "content-type": "text/event-stream" });
        if (completions++ === 0) {
          res.write(`data: ${JSON.stringify({ content: "a", tokens: [7] })}\n\n`);
          return;
        }
        const final = { content: "b", tokens: [8], stop: true, tokens_predicted: 1, timings: { cache_n: 0 } };
        return void res.end(`data: ${JSON.stringify(final)}\n\n`);
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => double!.listen(0, "127.0.0.1", r));
  const http = new HttpClient(`http://127.0.0.1:${(double!.address() as AddressInfo).port}`, {
    connectTimeoutMs: 5_000,
    headersTimeoutMs: boundMs,
    bodyTimeoutMs: boundMs,
    retries: 0,
    backoffMs: 5,
    maxBackoffMs: 10,
  });
  const cache = await LlamaSlotCache.detect(http, LlamaSlotsOptionsSchema.parse({ cacheRamMiB: 0 }));
  if (!cache) throw new Error("the double is not taken for a llama-server");
  return {
    cache,
    seen,
    /** The server ends the held prefill: its slot reads idle from now on. */
    release: () => {
      released = true;
    },
  };
}

const PROMPT = range(1, 40);
const req = (maxTokens = 8) => ({ id: "r", tokens: PROMPT, maxTokens });

/** Runs PROMPT, aborts it at its first token, and returns the sequences as they are at the rejection. */
async function abortRun(d: Awaited<ReturnType<typeof startDouble>>) {
  const ac = new AbortController();
  const run = d.cache.run(req(), {}, () => ac.abort(), ac.signal);
  await expect(run).rejects.toBeInstanceOf(EngineAbortedError);
  return d.cache.sequences();
}

describe("an aborted llama-server run", () => {
  it("hands the tree what the server kept of the slot, not the launch's guess (its whole prompt)", async () => {
    const d = await startDouble([[{ id: 0, is_processing: false, id_task: 0, n_prompt_tokens: 16 }]]);
    const sequences = await abortRun(d);
    expect(sequences).toEqual([PROMPT.subarray(0, 16)]);
    expect(d.cache.status().slotTokens).toEqual([16]);
    // Read already: the next run starts without a read of its own.
    const before = d.seen.length;
    await d.cache.run(req(1), {});
    expect(d.seen.slice(before)).toEqual(["POST /completion"]);
  });

  it("reads again while the server has not yet seen the abort (the slot still processing)", async () => {
    const d = await startDouble([
      [{ id: 0, is_processing: true, id_task: 0 }],
      [{ id: 0, is_processing: true, id_task: 0 }],
      [{ id: 0, is_processing: false, id_task: 0, n_prompt_tokens: 24 }],
    ]);
    const sequences = await abortRun(d);
    expect(sequences).toEqual([PROMPT.subarray(0, 24)]);
    expect(d.seen.filter((s) => s === "GET /slots")).toHaveLength(4);
  });

  it("an abort during a long prefill: reported at once, read back when the server sees it", async () => {
    // The server notices the abort only when its prefill ends: here when the test says so, well
    // within the engine's bound (30 s).
    const d = await startDouble("held");
    const changed: number[] = [];
    d.cache.watch(() => changed.push(d.cache.abortReadsMade));
    // Nothing known yet when the run is reported aborted: the launch's guess stands meanwhile.
    expect(await abortRun(d)).toEqual([PROMPT]);
    // Reported while the server still reads the slot busy, the reads going on: the node's next job
    // does not wait on the prefill (a rejection that waited for the reads would come only once the
    // slot read idle, which cannot happen before `release`, or at the bound, with the reads over).
    expect(d.cache.abortReading).toBe(true);
    expect(changed).toEqual([]);
    // The prefill goes on for at least 1.5 s after the abort, and until a few reads found it busy.
    const t0 = Date.now();
    await waitFor(
      () => Date.now() - t0 >= 1_500 && d.cache.abortReadsMade >= 4,
      15_000,
      "a few reads of the busy slot",
    );
    expect(changed).toEqual([]);
    d.release();
    await waitFor(() => changed.length === 1, 15_000, "the read-back to find the slot idle");
    expect(d.cache.sequences()).toContainEqual(PROMPT.subarray(0, 16));
    // Backed off: a few reads over the prefill's 1.5 s or more, not one every 10 ms (a slower
    // machine makes fewer, not more).
    expect(d.cache.abortReadsMade).toBeLessThanOrEqual(14);
  });

  it("gives up at the engine's own bound, and the next run reads before it starts", async () => {
    const d = await startDouble([[{ id: 0, is_processing: true, id_task: 0 }]], 1_000);
    const sequences = await abortRun(d);
    // Nothing better known: the launch's guess stays until the server says otherwise.
    expect(sequences).toEqual([PROMPT]);
    // The reads stop by the bound (1 s after the abort), backed off on the way.
    await waitFor(() => !d.cache.abortReading, 15_000, "the reads to stop");
    const last = d.cache.abortReadsMade;
    expect(last).toBeGreaterThanOrEqual(4);
    expect(last).toBeLessThanOrEqual(12);
    const before = d.seen.length;
    await d.cache.run(req(1), {});
    expect(d.seen.slice(before)).toEqual(["GET /slots", "POST /completion"]);
  });
});
