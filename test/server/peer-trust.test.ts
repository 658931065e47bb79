/**
 * Peer trust on two in-process daemons: B acks A's forwards and never answers them (its engine
 * stalls). A fails over at each forward's expected time plus slack, not at the 30 s forward timeout,
 * opens B's breaker after a few, shows it in /cluster and /metrics, and then serves at once.
 */
import { afterAll, describe, expect, it } from "vitest";
import type { EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { modelOf, postCompletion } from "../api-client.js";
import { pair, TestSimEngine } from "./helpers.js";

/** Test double: a simulated engine whose runs hang while `stalled` (until released or aborted). */
class StallingEngine extends TestSimEngine {
  stalled = false;
  private readonly hung: (() => void)[] = [];

  override async run(
    req: EngineRequest,
    onChunk?: (c: EngineChunk) => void,
    signal?: AbortSignal,
  ): Promise<EngineResult> {
    if (this.stalled) {
      await new Promise<void>((resolve) => {
        this.hung.push(resolve);
        signal?.addEventListener("abort", () => resolve(), { once: true });
      });
    }
    return super.run(req, onChunk, signal);
  }

  release(): void {
    this.stalled = false;
    for (const r of this.hung.splice(0)) r();
  }
}

describe("peer trust: a peer that acks and never answers", () => {
  const PREFIXES = 8;
  const prefix = (k: number) => Array.from({ length: 300 }, (_, i) => `trusted${k}w${i}`).join(" ");
  const stalling = new StallingEngine();
  let a: NodeHandle | undefined;
  let b: NodeHandle | undefined;
  afterAll(async () => {
    stalling.release();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it("is failed over from at its expected time, demoted after a few forwards, and shown as such", async () => {
    [a, b] = await pair({ policy: "affinity" }, { B: stalling });
    const api = a.apiUrl;
    const model = await modelOf(api);
    // B alone holds each prefix (A would serve one itself once it ran it after a fallback).
    for (let k = 0; k < PREFIXES; k++) {
      const r = await postCompletion(b.apiUrl, { model, prompt: `${prefix(k)} warm`, max_tokens: 1 });
      expect(r.status).toBe(200);
      await r.json();
    }
    const viewOfB = async () =>
      ((await (await fetch(`${api}/cluster`)).json()) as { peers: PeerView[] }).peers[0] as PeerView;
    const liveWithAll = async () => {
      const v = await viewOfB();
      return v.liveness === "live" && v.estimateTokens >= PREFIXES * 256;
    };
    await waitFor(liveWithAll, 20_000, "A never learned B's prefixes");
    stalling.stalled = true;
    const overdue = async () => {
      const m = /prefixmesh_forward_events\{[^}]*event="overdue_answer"[^}]*\} (\d+)/.exec(
        await (await fetch(`${api}/metrics`)).text(),
      );
      return Number(m?.[1] ?? 0);
    };
    // B looks idle to A: the stalled run of the forward before was cancelled once A ran it itself.
    // Else the held depth B reports for that run (executor.ts) prices the next forward's expected
    // time at A's service time per job, which on a busy machine passes the forward timeout: a
    // staller that shows its stall is routed around by load, not judged overdue.
    const idleWithAll = async () => (await liveWithAll()) && (await viewOfB()).queueDepth === 0;
    let sent = 0;
    // Each request is answered (A runs it after giving up on B) before the forward timeout, and it
    // was given up as overdue: at its expected time plus slack, which a busy machine stretches (its
    // measured run and round trip grow), so the count, not a fraction of the timeout, tells them apart.
    for (; sent < PREFIXES && (await viewOfB()).trust?.state !== "open"; sent++) {
      await waitFor(idleWithAll, 20_000, "B is not live and idle");
      const before = await overdue();
      const t0 = Date.now();
      const r = await postCompletion(api, { model, prompt: `${prefix(sent)} q`, max_tokens: 1 });
      expect(r.status).toBe(200);
      await r.json();
      expect(Date.now() - t0).toBeLessThan(DAEMON_NODE_DEFAULTS.forwardTimeoutMs);
      expect(await overdue()).toBeGreaterThan(before);
    }
    const { trust } = await viewOfB();
    expect(trust?.state).toBe("open");
    expect(trust?.failures).toBe(3);
    expect(trust?.score).toBeLessThan(0.5);
    expect(sent).toBeGreaterThanOrEqual(3);
    // Demoted: a request with a prefix only B holds is not sent to B any more.
    const t0 = Date.now();
    const r = await postCompletion(api, { model, prompt: `${prefix(PREFIXES - 1)} after`, max_tokens: 1 });
    expect(r.status).toBe(200);
    await r.json();
    // Not sent to B (which would hold it until the forward timeout): generous for a busy machine.
    expect(Date.now() - t0).toBeLessThan(DAEMON_NODE_DEFAULTS.forwardTimeoutMs / 3);
    expect((await viewOfB()).trust?.failures).toBe(3);
    const metrics = await (await fetch(`${api}/metrics`)).text();
    expect(metrics).toMatch(/prefixmesh_peer_breaker_open\{[^}]*peer="B"[^}]*\} 1/);
    expect(metrics).toMatch(/prefixmesh_peer_trust_score\{[^}]*peer="B"[^}]*\} 0\.\d+/);
  }, 180_000);
});

interface PeerView {
  liveness: string;
  queueDepth: number;
  estimateTokens: number;
  trust: { score: number; state: string; failures: number } | null;
}

/** Polls `cond` until it holds (throws with `what` after `ms`). */
async function waitFor(cond: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  for (const deadline = Date.now() + ms; !(await cond()); ) {
    if (Date.now() > deadline) throw new Error(what);
    await new Promise((r) => setTimeout(r, 20));
  }
}
