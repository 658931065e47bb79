import { afterEach, describe, expect, it } from "vitest";
import type { EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import type { NodeStats } from "../../src/core/node/types.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { waitFor } from "../e2e/helpers.js";
import { routedPair, soloNode, TestSimEngine } from "./helpers.js";

/**
 * The test's simulated engine: while `gating`, each run waits until the test lets it go; it records
 * what it ran (the prompt, and the origin's request id).
 */
class GatedEngine extends TestSimEngine {
  readonly started: string[] = [];
  readonly ids: string[] = [];
  gating = true;
  private readonly gates: (() => void)[] = [];

  /** Lets the oldest held run go on. */
  release(): void {
    this.gates.shift()?.();
  }

  override async run(req: EngineRequest, onChunk?: (c: EngineChunk) => void): Promise<EngineResult> {
    this.started.push(req.prompt ?? "");
    this.ids.push(req.id);
    if (this.gating) await new Promise<void>((go) => this.gates.push(go));
    return super.run(req, onChunk);
  }
}

let node: NodeHandle | undefined;
let nodes: NodeHandle[] = [];
afterEach(async () => {
  await Promise.all([node, ...nodes].map((n) => n?.stop()));
  node = undefined;
  nodes = [];
});

/** `queuedJobs`: the jobs (`queueDepth` counts a run held past 8 mean service times as more, offload). */
type View = { queuedJobs: number; inFlightClients: number; stats: NodeStats };
const viewOf = (n: NodeHandle) => n.runtime.clusterView() as View;

describe("a client hanging up", () => {
  it("drops its queued request (plain and streaming), lets a running one finish unreplied", async () => {
    const engine = new GatedEngine();
    const { node: n, model } = await soloNode(engine);
    node = n;
    const api = n.apiUrl;
    const view = () => viewOf(n);
    const post = (prompt: string, stream: boolean, signal?: AbortSignal) =>
      fetch(`${api}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, prompt, max_tokens: 4, stream }),
        ...(signal ? { signal } : {}),
      }).then(
        async (r) => ({ status: r.status, text: await r.text() }),
        (err: Error) => ({ status: 0, text: err.name }),
      );

    // "hold" takes the one slot; two more wait behind it, and their clients hang up.
    const held = post("hold the slot", false);
    await waitFor(() => engine.started.length === 1, 15_000, "the first run to start");
    const plain = new AbortController();
    const streamed = new AbortController();
    const gone = [post("gone plain", false, plain.signal), post("gone streamed", true, streamed.signal)];
    await waitFor(() => view().inFlightClients === 3, 15_000, "both to wait in the queue");
    expect(view()).toMatchObject({ queuedJobs: 3 });
    plain.abort();
    streamed.abort();
    expect((await Promise.all(gone)).map((r) => r.status)).toEqual([0, 0]);
    await waitFor(() => view().stats.clientGoneQueued === 2, 15_000, "both hang-ups to reach the node");
    expect(view()).toMatchObject({ queuedJobs: 1, inFlightClients: 1 });

    engine.release();
    expect((await held).status).toBe(200);
    await waitFor(() => view().queuedJobs === 0, 15_000, "idle");
    expect(engine.started).toEqual(["hold the slot"]);

    // A running request's client hangs up: this engine ignores the abort (engine-abort.test.ts has one
    // that honours it), so the run ends and its answer goes nowhere.
    const running = new AbortController();
    const late = post("gone running", false, running.signal);
    await waitFor(() => engine.started.length === 2, 15_000, "the second run to start");
    running.abort();
    expect((await late).status).toBe(0);
    await waitFor(() => view().stats.clientGoneRunning === 1, 15_000, "the hang-up to reach the node");
    engine.release();
    await waitFor(() => view().stats.servedLocal === 2, 15_000, "the abandoned run to finish");
    expect(view()).toMatchObject({
      inFlightClients: 0,
      stats: { clientGoneQueued: 2, clientGoneForwarded: 0 },
    });

    const metrics = await (await fetch(`${api}/metrics`)).text();
    expect(metrics).toMatch(/prefixmesh_client_gone_total\{stage="queued",reason="hangup",node="A"\} 2/);
    expect(metrics).toMatch(/prefixmesh_client_gone_total\{stage="running",reason="hangup",node="A"\} 1/);
    expect(metrics).not.toMatch(/prefixmesh_client_gone_total\{[^}]*reason="deadline"[^}]*\} [1-9]/);
    // Clients giving up are no failure of the mesh: an alert on outcome="error" stays quiet.
    expect(metrics).toMatch(/prefixmesh_requests_total\{outcome="gone",route="none",node="A"\} 3\n/);
    expect(metrics).not.toMatch(/prefixmesh_requests_total\{outcome="error"/);
  }, 60_000);

  it("tells a passed deadline (504) from a hang-up in prefixmesh_client_gone_total's reason", async () => {
    const engine = new GatedEngine();
    const { node: n, model } = await soloNode(engine);
    node = n;
    const api = n.apiUrl;
    const post = (prompt: string, headers: Record<string, string> = {}) =>
      fetch(`${api}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ model, prompt, max_tokens: 4 }),
      }).then(async (r) => ({ status: r.status, body: await r.text() }));

    const held = post("hold the slot");
    await waitFor(() => engine.started.length === 1, 15_000, "the first run to start");
    // Queued behind the held run: its deadline passes while it waits.
    const late = await post("too late", { "x-prefixmesh-deadline-ms": "1500" });
    expect(late.status).toBe(504);
    expect(late.body).toContain("deadline_exceeded");
    await waitFor(() => viewOf(n).stats.clientGoneQueued === 1, 15_000, "the deadline to reach the node");
    engine.release();
    expect((await held).status).toBe(200);

    const metrics = await (await fetch(`${api}/metrics`)).text();
    expect(metrics).toMatch(/prefixmesh_client_gone_total\{stage="queued",reason="deadline",node="A"\} 1/);
    expect(metrics).not.toMatch(/prefixmesh_client_gone_total\{[^}]*reason="hangup"[^}]*\} [1-9]/);
    // A passed deadline is answered 504: an error, as the request line's status says.
    expect(metrics).toMatch(/prefixmesh_requests_total\{outcome="error",route="none",node="A"\} 1\n/);
  }, 60_000);
});

describe("a client hanging up while its request waits at a peer", () => {
  it("sends the peer a cancel: the forward is dropped from its queue, nobody runs it", async () => {
    const engine = new GatedEngine();
    engine.gating = false;
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
    const post = (url: string, prompt: string, signal?: AbortSignal) =>
      fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, prompt, max_tokens: 4 }),
        ...(signal ? { signal } : {}),
      }).then(
        (r) => r.status,
        () => 0,
      );
    // B's one slot is taken by a client of its own; A forwards the prefix's request to B, where it queues.
    engine.gating = true;
    const runs = engine.ids.length;
    const held = post(b.apiUrl, "hold the slot at B");
    await waitFor(() => engine.ids.length === runs + 1, 15_000, "B's run to start");
    const client = new AbortController();
    const gone = post(a.apiUrl, `${prefix} then gone`, client.signal);
    await waitFor(() => viewOf(b).queuedJobs === 2, 15_000, "the forward to queue at B");
    expect(viewOf(a).stats.forwarded).toBe(1);
    client.abort();
    expect(await gone).toBe(0);
    await waitFor(() => viewOf(b).stats.cancelledForwards === 1, 15_000, "B to drop the forward");
    expect(viewOf(a).stats).toMatchObject({ clientGoneForwarded: 1, fallbacks: 0 });
    expect(viewOf(b).queuedJobs).toBe(1);
    engine.release();
    expect(await held).toBe(200);
    await waitFor(() => viewOf(b).queuedJobs === 0 && viewOf(a).queuedJobs === 0, 15_000, "both idle");
    // Neither node ran it: B's engine ran only its own client's requests, A's nothing.
    expect(engine.ids.filter((id) => id.startsWith("A-"))).toEqual([]);
    expect(viewOf(a).stats).toMatchObject({ servedLocal: 0, clientGoneForwarded: 1, fallbacks: 0 });
  }, 60_000);
});
