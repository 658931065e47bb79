import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import type { Engine, EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import type { NodeStats } from "../../src/core/node/types.js";
import { resolveProfile } from "../../src/engines/sim/profiles.js";
import { SimEngine } from "../../src/engines/sim/sim-engine.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { modelOf, postCompletion } from "../api-client.js";
import { waitFor } from "../e2e/helpers.js";
import { type PeerRow, routedPair, soloNode } from "./helpers.js";

/** The simulator's engine in real time (a long answer takes seconds), noting how each run ended. */
class SlowEngine extends SimEngine {
  readonly ends: string[] = [];
  started = 0;

  constructor(timeScale = 1) {
    super({ profile: resolveProfile("paper-h100-qwen0.5b"), timeScale });
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
const dirs: string[] = [];
afterEach(async () => {
  await Promise.all([node, ...nodes].map((x) => x?.stop()));
  node = undefined;
  nodes = [];
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
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
        // The ack wait's floor (250 ms) is a LAN's: on a busy machine B's ack can come later, and A
        // would give the attempt up and run the request itself, which is not what this test is about.
        extra: { forwardAckTimeoutMs: "15000" },
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

describe("a peer that leaves while it runs a forward (gossip scuttlebutt)", () => {
  const prefix = Array.from({ length: 300 }, (_, i) => `text${i}`).join(" ");
  const statsOf = (x: NodeHandle) => (x.runtime.clusterView() as { stats: NodeStats }).stats;
  const post = (x: NodeHandle, model: string, prompt: string, maxTokens: number) =>
    fetch(`${x.apiUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt, max_tokens: maxTokens }),
    }).then(async (r) => ({ status: r.status, by: r.headers.get("x-prefixmesh-served-by") }));

  it("drains, and aborts the run on the final cancel once the origin answered elsewhere", async () => {
    const engine = new SlowEngine();
    const { a, b, model } = await routedPair(
      prefix,
      { B: engine },
      {
        extra: { gossip: "scuttlebutt" },
        onStart: (x, y) => {
          nodes = [x, y];
        },
      },
    );
    const warm = engine.started;
    // 4,000 tokens of decode at B: 20 s of engine time, as long as B's drain, were it not aborted.
    const answer = post(a, model, `${prefix} then B leaves`, 4_000);
    await waitFor(() => engine.started === warm + 1, 15_000, "B's run of the forward to start");
    expect(statsOf(a).forwarded).toBe(1);
    // B stops (the SIGTERM path): goodbye, then it drains what it took. A runs the request itself,
    // and its final cancel still reaches B, though B is no member of A's any more.
    const stopped = b.stop();
    await waitFor(() => engine.ends.length === warm + 1, 15_000, "B's engine run to end");
    expect(engine.ends.at(-1)).toBe("AbortError");
    expect(statsOf(b).abortedCancelled).toBe(1);
    await stopped;
    expect(await answer).toEqual({ status: 200, by: "A" });
  }, 60_000);

  /**
   * A, and B joined through A (B is no seed of A's: A's transport holds B only while SWIM does), in
   * shared-secret mode; B has served `prefix` and A's estimate of it shows so.
   */
  async function joinedPair(engines: { A: Engine; B: Engine }) {
    const dir = mkdtempSync(join(tmpdir(), "pm-leave-"));
    dirs.push(dir);
    const secretFile = join(dir, "cluster.secret");
    writeFileSync(secretFile, randomBytes(32).toString("hex"));
    const ports = await Promise.all([0, 1, 2, 3].map(() => freePort("127.0.0.1")));
    const start = (id: "A" | "B", i: number, engine: Engine, more: Record<string, unknown>) =>
      startNode(
        resolveNodeSettings(
          {
            id,
            engine: "sim",
            pollMs: "50",
            gossip: "scuttlebutt",
            policy: "affinity",
            secretFile,
            logLevel: "silent",
            listen: `127.0.0.1:${ports[2 * i]}`,
            peerListen: `127.0.0.1:${ports[2 * i + 1]}`,
            ...more,
          },
          {},
        ),
        { logger: pino({ level: "silent" }), engine },
      );
    const a = await start("A", 0, engines.A, {});
    nodes.push(a);
    const b = await start("B", 1, engines.B, { join: `127.0.0.1:${ports[1]}` });
    nodes.push(b);
    const model = await modelOf(b.apiUrl);
    await postCompletion(b.apiUrl, { model, prompt: `${prefix} warm`, max_tokens: 1 });
    const estimateOfB = () =>
      (a.runtime.clusterView() as { peers: (PeerRow & { id: string })[] }).peers.find((p) => p.id === "B")
        ?.estimateTokens ?? 0;
    await waitFor(() => estimateOfB() >= 256, 15_000, "A to learn B's tree");
    return { a, b, model };
  }

  it("the final cancel goes as the origin drops the member, and still reaches the draining peer", async () => {
    // A's engine 5 × faster than B's: A's own job (2 s) keeps it busy while B leaves, so the request
    // back from B waits in A's queue; B's answer would be a non-member's, taken no more, so its final
    // cancel goes as A drops B, through the pool A's transport keeps; B's run would take 10 s.
    const engineA = new SlowEngine(0.2);
    const engine = new SlowEngine();
    const { a, b, model } = await joinedPair({ A: engineA, B: engine });
    const warmA = engineA.started;
    const own = post(a, model, "words nobody else has served", 2_000);
    await waitFor(() => engineA.started === warmA + 1, 15_000, "A's own job to start");
    const warm = engine.started;
    const answer = post(a, model, `${prefix} then B leaves`, 2_000);
    await waitFor(() => engine.started === warm + 1, 15_000, "B's run of the forward to start");
    const stopped = b.stop();
    await waitFor(() => !a.runtime.peerHandlers().isKnownPeer("B"), 15_000, "A to drop B");
    await waitFor(() => engine.ends.length === warm + 1, 15_000, "B's engine run to end");
    expect(engine.ends.at(-1)).toBe("AbortError");
    expect(statsOf(b).abortedCancelled).toBe(1);
    await stopped;
    expect(await own).toEqual({ status: 200, by: "A" });
    expect(await answer).toEqual({ status: 200, by: "A" });
  }, 60_000);
});
