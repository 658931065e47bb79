import { afterEach, describe, expect, it } from "vitest";
import type { EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import type { NodeStats } from "../../src/core/node/types.js";
import { resolveProfile } from "../../src/engines/sim/profiles.js";
import { SimEngine } from "../../src/engines/sim/sim-engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { waitFor } from "../e2e/helpers.js";
import { routedPair, soloNode } from "./helpers.js";

/** The simulator's engine in real time (a long answer takes seconds), noting how each run ended. */
class SlowEngine extends SimEngine {
  readonly ends: string[] = [];
  started = 0;

  constructor() {
    super({ profile: resolveProfile("paper-h100-qwen0.5b") });
  }

  override async run(req: EngineRequest, onChunk?: (c: EngineChunk) => void, signal?: AbortSignal) {
    this.started++;
    try {
      const r: EngineResult = await super.run(req, onChunk, signal);
      this.ends.push("done");
      return r;
    } catch (e) {
      this.ends.push((e as Error).name);
      throw e;
    }
  }
}

let node: NodeHandle | undefined;
let nodes: NodeHandle[] = [];
afterEach(async () => {
  await Promise.all([node, ...nodes].map((x) => x?.stop()));
  node = undefined;
  nodes = [];
});

describe("a client hanging up while its request runs", () => {
  it("aborts the engine run: the slot frees at once, counted as aborted, not failed", async () => {
    const engine = new SlowEngine();
    const { node: n, model } = await soloNode(engine);
    node = n;
    const api = n.apiUrl;
    const stats = () => (n.runtime.clusterView() as { stats: NodeStats }).stats;
    const post = (prompt: string, maxTokens: number, signal?: AbortSignal) =>
      fetch(`${api}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, prompt, max_tokens: maxTokens }),
        ...(signal ? { signal } : {}),
      }).then(
        async (r) => ({ status: r.status, text: await r.text() }),
        (err: Error) => ({ status: 0, text: err.name }),
      );

    // 4,000 tokens of decode (the ceiling): 20 s of engine time, were it not aborted.
    const client = new AbortController();
    const long = post("a question whose answer is very long", 4_000, client.signal);
    await waitFor(() => engine.started === 1, 15_000, "the run to start");
    client.abort();
    expect((await long).status).toBe(0);
    await waitFor(() => engine.ends.length === 1, 15_000, "the engine run to end");
    expect(engine.ends).toEqual(["AbortError"]);
    await waitFor(() => stats().abortedClientGone === 1, 15_000, "the node to hear of the abort");
    expect(stats()).toMatchObject({ clientGoneRunning: 1, engineFailures: 0, servedLocal: 0 });

    // The slot is free: a short request runs now, not after those 20 s.
    const next = await post("a short one", 2);
    expect(next.status).toBe(200);
    expect(engine.ends).toEqual(["AbortError", "done"]);

    const metrics = await (await fetch(`${api}/metrics`)).text();
    expect(metrics).toMatch(/prefixmesh_engine_aborted_total\{reason="client-gone",node="A"\} 1/);
    expect(metrics).toMatch(/prefixmesh_client_gone_total\{stage="running",reason="hangup",node="A"\} 1/);
  }, 60_000);
});

describe("a client hanging up while a peer runs its request", () => {
  it("the peer aborts the run on the origin's final cancel, and is not held to blame", async () => {
    const engine = new SlowEngine();
    const prefix = Array.from({ length: 300 }, (_, i) => `text${i}`).join(" ");
    const { a, b, model } = await routedPair(
      prefix,
      { B: engine },
      {
        onStart: (x, y) => {
          nodes = [x, y];
        },
      },
    );
    const statsOf = (x: NodeHandle) => (x.runtime.clusterView() as { stats: NodeStats }).stats;
    const warm = engine.started;
    const client = new AbortController();
    const gone = fetch(`${a.apiUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt: `${prefix} then gone`, max_tokens: 4_000 }),
      signal: client.signal,
    }).then(
      (r) => r.status,
      () => 0,
    );
    await waitFor(() => engine.started === warm + 1, 15_000, "B's run of the forward to start");
    expect(statsOf(a).forwarded).toBe(1);
    client.abort();
    expect(await gone).toBe(0);
    await waitFor(() => engine.ends.length === warm + 1, 15_000, "B's engine run to end");
    expect(engine.ends.at(-1)).toBe("AbortError");
    await waitFor(() => statsOf(b).abortedCancelled === 1, 15_000, "B to count the abort");
    expect(statsOf(b)).toMatchObject({ engineFailures: 0, servedForPeers: 0 });
    expect(statsOf(a)).toMatchObject({ clientGoneForwarded: 1, fallbacks: 0, servedLocal: 0 });
    await waitFor(
      () => (b.runtime.clusterView() as { queueDepth: number }).queueDepth === 0,
      15_000,
      "B idle",
    );
  }, 60_000);
});
