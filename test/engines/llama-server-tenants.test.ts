/**
 * Tenants never share llama.cpp server's cache (the real `llama-server`, stories260K): the server
 * compares tokens only, so the node's slot mirror lets a request reuse only its own namespace's
 * content and sends any other with `cache_prompt: false`. Checked on one engine with one slot (tenant
 * B must take the slot holding tenant A's prompt, directly or restored from the RAM prompt cache) and
 * across a forward between two nodes, each fronting its own one-slot server.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineRequest } from "../../src/core/engine.js";
import { keyTokens } from "../../src/core/namespace.js";
import { OpenAIEngine, type RemoteEngineResult } from "../../src/engines/openai/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { startPair } from "../node-pair.js";
import { type LlamaServer, llamaServerSkip, MODEL, startLlamaServer } from "./llama-server.js";

const skip = llamaServerSkip() !== undefined;

/** Token ids in the model's vocabulary (512), BOS first. */
function prompt(seed: number, n = 60): Uint32Array {
  const out = new Uint32Array(n);
  out[0] = 1;
  for (let i = 1; i < n; i++) out[i] = 3 + ((seed * 97 + i * 13) % 500);
  return out;
}
let seq = 0;
const req = (tokens: Uint32Array, cacheSalt?: string): EngineRequest => ({
  id: `t${++seq}`,
  tokens,
  maxTokens: 2,
  temperature: 0,
  ...(cacheSalt !== undefined ? { cacheSalt } : {}),
});

describe.skipIf(skip)("tenants on one real llama-server with one slot", () => {
  let server: LlamaServer;
  let engine: OpenAIEngine;
  beforeAll(async () => {
    server = await startLlamaServer({ slots: 1, contextTokens: 512 });
    engine = await OpenAIEngine.create({ baseUrl: server.url, model: MODEL, retries: 0 });
  });
  afterAll(async () => {
    await engine?.close();
    await server?.stop();
  });

  /** Runs `r`; the mirror's prediction must be the server's own report. */
  async function run(r: EngineRequest): Promise<RemoteEngineResult> {
    const res = await engine.run(r);
    expect(res.cacheReported).toBe(true);
    expect(res.cachePrediction?.predicted).toBe(res.cachedTokens);
    return res;
  }

  it("gives tenant B nothing of tenant A's slot, then B's own prefix", async () => {
    expect(engine.cacheStatus().mode).toBe("llama-slots");
    const p = prompt(1);
    expect((await run(req(p, "tenant-a"))).cachedTokens).toBe(0);
    expect((await run(req(p, "tenant-a"))).cachedTokens).toBe(p.length - 1);
    // The same prompt, tenant B, on the one slot holding A's: the server reuses nothing.
    expect((await run(req(p, "tenant-b"))).cachedTokens).toBe(0);
    expect((await run(req(p, "tenant-b"))).cachedTokens).toBe(p.length - 1);
    // The slot is B's now: A (and the default namespace) get nothing from it.
    expect((await run(req(p))).cachedTokens).toBe(0);
    expect((await run(req(p, "tenant-a"))).cachedTokens).toBe(0);
    // The node's tree mirrors A's prompt under A's cache key, which no other namespace matches.
    const keyA = keyTokens({ cacheSalt: "tenant-a", tokens: p });
    expect(engine.cachedSequences().some((s) => s[0] === keyA[0] && s[keyA.length - 1] === p.at(-1))).toBe(
      true,
    );
  }, 120_000);

  it("gives tenant B nothing of a prompt of A's the server restores from its RAM cache", async () => {
    const a = prompt(2, 100);
    await run(req(a, "tenant-a"));
    // Another prompt of A's takes the slot: a goes to the server's RAM prompt cache.
    await run(req(prompt(3, 100), "tenant-a"));
    expect(engine.cacheStatus().llamaSlots?.cachedPrompts).toBeGreaterThan(0);
    // B's prompt shares a's first 90 tokens: the server restores a into the slot, B reuses none of it.
    const b = Uint32Array.from([...a.subarray(0, 90), ...prompt(4, 11).subarray(1)]);
    expect((await run(req(b, "tenant-b"))).cachedTokens).toBe(0);
    expect((await run(req(b, "tenant-b"))).cachedTokens).toBe(b.length - 1);
    const { accuracy } = engine.cacheStatus();
    expect(accuracy.exact).toBe(accuracy.requests);
  }, 120_000);
});

describe.skipIf(skip)("tenants on one real llama-server with saved slots (--slot-save-path)", () => {
  let server: LlamaServer;
  let engine: OpenAIEngine;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "prefixmesh-tenant-saves-"));
    // One slot and no RAM cache: only the saved states can bring a tenant's prompt back.
    server = await startLlamaServer({
      slots: 1,
      contextTokens: 512,
      args: ["--slot-save-path", dir, "--cache-ram", "0"],
    });
    engine = await OpenAIEngine.create({
      baseUrl: server.url,
      model: MODEL,
      retries: 0,
      llamaSlots: { cacheRamMiB: 0, savedSlots: 4 },
    });
  });
  afterAll(async () => {
    await engine?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("saves tenant A's slot before B takes it, and restores it for A only", async () => {
    const p = prompt(5, 80);
    const run = async (salt: string) => {
      const r = await engine.run(req(p, salt));
      expect(r.cachePrediction?.predicted).toBe(r.cachedTokens);
      return r.cachedTokens;
    };
    expect(await run("tenant-a")).toBe(0);
    // B on A's slot: A's content is saved to disk first; B reuses none of it.
    expect(await run("tenant-b")).toBe(0);
    expect(engine.cacheStatus().llamaSlots?.savedSlots.saves).toBeGreaterThanOrEqual(1);
    // A again: its own saved state is restored into the slot (B's is saved first).
    expect(await run("tenant-a")).toBe(p.length - 1);
    expect(engine.cacheStatus().llamaSlots?.savedSlots.restores).toBe(1);
    // And B's comes back for B.
    expect(await run("tenant-b")).toBe(p.length - 1);
    expect(engine.cacheStatus().llamaSlots?.savedSlots.restores).toBe(2);
  }, 120_000);
});

/** A's view of B on GET /cluster (the fields read here). */
interface PeerRow {
  id: string;
  liveness: string;
  suspected: boolean;
  estimateTokens: number;
  held?: { epoch: number; version: number };
}

describe.skipIf(skip)(
  "tenants across a forward between two nodes, each fronting its own llama-server",
  () => {
    const servers: LlamaServer[] = [];
    const nodes: NodeHandle[] = [];
    const client = (n: NodeHandle) =>
      new OpenAI({ baseURL: `${n.apiUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });

    beforeAll(async () => {
      // One slot each: a tenant's request on a server must take the slot the other tenant left there.
      const one = { slots: 1, contextTokens: 512 };
      servers.push(...(await Promise.all([startLlamaServer(one), startLlamaServer(one)])));
      const pair = await startPair((i) => ({
        pollMs: "50",
        forwardAckTimeoutMs: "15000",
        // The paper's rule (longest estimated prefix): stories260K's prefill is too cheap for the
        // cost-aware default to forward for a cached prefix.
        policy: "affinity",
        engine: "openai",
        engineUrl: servers[i]!.url,
        model: MODEL,
      }));
      nodes.push(...pair);
    });
    afterAll(async () => {
      await Promise.all(nodes.map((n) => n.stop()));
      await Promise.all(servers.map((s) => s.stop()));
    });

    async function complete(at: NodeHandle, text: string, salt: string) {
      const { data, response } = await client(at)
        .completions.create({ model: MODEL, prompt: text, max_tokens: 2, cache_salt: salt } as never)
        .withResponse();
      const usage = (data as OpenAI.Completion).usage;
      return {
        servedBy: response.headers.get("x-prefixmesh-served-by"),
        cached: usage?.prompt_tokens_details?.cached_tokens ?? 0,
        promptTokens: usage?.prompt_tokens ?? 0,
      };
    }

    /**
     * Until `from` holds `peer`'s tree as it is now: its estimate then has the runs done before. (A
     * snapshot merely received since then may have left `peer` before its last run.)
     */
    async function untilHeard(from: NodeHandle, peer: NodeHandle): Promise<void> {
      const own = (await (await fetch(`${peer.apiUrl}/cluster`)).json()) as {
        id: string;
        epoch: number;
        treeVersion: number;
      };
      const deadline = Date.now() + 30_000;
      for (;;) {
        const view = (await (await fetch(`${from.apiUrl}/cluster`)).json()) as { peers: PeerRow[] };
        const row = view.peers.find((p) => p.id === own.id);
        const held = row?.held?.epoch === own.epoch && row.held.version >= own.treeVersion;
        if (row && held && row.estimateTokens > 0 && row.liveness === "live" && !row.suspected) return;
        if (Date.now() > deadline) throw new Error(`no estimate of ${own.id}: ${JSON.stringify(view)}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    }

    it("forwards a tenant to its own cached prefix, and gives the other tenant none of it", async () => {
      const [a, b] = nodes as [NodeHandle, NodeHandle];
      const text =
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. " +
        "One day, she saw a big red ball under a tree. She ran to the ball and picked it up. ";
      const warm = await complete(b, text, "tenant-a");
      expect(warm.servedBy).toBe("B");
      expect(warm.cached).toBe(0);
      await untilHeard(a, b);
      // Tenant A's prompt entering at A goes to B, whose server holds it for tenant A.
      const own = await complete(a, text, "tenant-a");
      expect(own.servedBy).toBe("B");
      expect(own.cached).toBe(own.promptTokens - 1);
      // Tenant B's same prompt at B, whose one slot holds it for tenant A: nothing is reused.
      const other = await complete(b, text, "tenant-b");
      expect(other.servedBy).toBe("B");
      expect(other.cached).toBe(0);
      await untilHeard(a, b);
      // Tenant B again, entering at A: forwarded to B, whose server now holds it for tenant B.
      const again = await complete(a, text, "tenant-b");
      expect(again.servedBy).toBe("B");
      expect(again.cached).toBe(again.promptTokens - 1);
      // And tenant A's is gone from B's one slot: A gets nothing there now.
      const gone = await complete(b, text, "tenant-a");
      expect(gone.servedBy).toBe("B");
      expect(gone.cached).toBe(0);
    }, 180_000);
  },
);
