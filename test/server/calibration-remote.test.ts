/**
 * Start-up calibration against remote servers that stall: its budget is a deadline, so the request
 * in flight (a `/tokenize`, a `/v1/completions` run) is aborted at it, not waited out. First a TEST
 * DOUBLE of an OpenAI-compatible server (127.0.0.1 only, no inference) that never answers them; then
 * the real llama.cpp server, stopped (SIGSTOP) as a heavily loaded machine would leave it.
 */
import { afterEach, describe, expect, it } from "vitest";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { calibrateEngine } from "../../src/server/runtime/calibration.js";
import { waitFor } from "../e2e/helpers.js";
import { type LlamaServer, llamaServerSkip, MODEL, startLlamaServer } from "../engines/llama-server.js";
import { closedAfterEach, stallingDouble } from "../engines/server-double.js";

/** What a loaded machine may add to a deadline before the timer fires (generous: shared cores). */
const SLACK_MS = 2_000;

const live = closedAfterEach<OpenAIEngine>();
let server: LlamaServer | undefined;
afterEach(async () => {
  server?.child.kill("SIGCONT");
  await server?.stop();
  server = undefined;
});

describe("calibration against a stalling server (test double)", () => {
  it.each([
    ["/tokenize", "server"],
    ["/v1/completions", "local"],
  ] as const)("aborts a held %s at the budget, with no run", async (path, tokenizer) => {
    const d = await stallingDouble(live);
    live.engine = new OpenAIEngine({ baseUrl: d.url, model: "m", tokenizer, retries: 0 });
    // Found before the budget starts (the shape probe; the local tokenizer's load), so the held
    // request, not these, is what the budget cuts short.
    await live.engine.tokenize("Hello, world");
    const budgetMs = 500;
    const t0 = performance.now();
    const c = await calibrateEngine(live.engine, { budgetMs });
    expect(performance.now() - t0).toBeLessThan(budgetMs + SLACK_MS);
    expect(c).toMatchObject({ samples: [], stopped: "budget" });
    expect(d.held).toEqual([path]);
    await waitFor(() => d.closed.length === 1, 10_000, "the held request to be aborted");
    expect(d.closed).toEqual([path]);
  });
});

const skip = llamaServerSkip() !== undefined;

describe.skipIf(skip)("calibration against the real llama.cpp server", () => {
  it("ends at its budget while the server is stopped, and the engine serves once it runs again", async () => {
    server = await startLlamaServer({ slots: 1, contextTokens: 512 });
    live.engine = await OpenAIEngine.create({
      baseUrl: server.url,
      model: MODEL,
      retries: 0,
      llamaSlots: {},
    });
    expect(live.engine.info.cacheMode).toBe("engine-managed");
    // Stopped, the server accepts connections (the kernel does) but never answers: a stalled machine.
    server.child.kill("SIGSTOP");
    const budgetMs = 500;
    const t0 = performance.now();
    const c = await calibrateEngine(live.engine, { budgetMs });
    expect(performance.now() - t0).toBeLessThan(budgetMs + SLACK_MS);
    expect(c).toMatchObject({ samples: [], stopped: "budget" });

    server.child.kill("SIGCONT");
    const again = await calibrateEngine(live.engine, { budgetMs: 60_000 });
    expect(again.stopped).toBeUndefined();
    expect(again.samples).toHaveLength(6);
  });
});
