/**
 * Routing between two prefixmesh nodes, each fronting its OWN real llama.cpp server (two llama-server
 * processes on 127.0.0.1): a prompt whose prefix node B's server holds, entering at A, is forwarded
 * to B, and B's server reports the prefix as cached. Driven by the official `openai` client.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BLOCK_SIZE } from "../../src/core/block-hash.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { startPair } from "../node-pair.js";
import { type LlamaServer, llamaServerSkip, MODEL, startLlamaServer } from "./llama-server.js";

const skip = llamaServerSkip() !== undefined;

async function serverTokens(server: LlamaServer, content: string): Promise<number[]> {
  const res = await fetch(`${server.url}/tokenize`, {
    method: "POST",
    body: JSON.stringify({ content, add_special: true }),
  });
  return ((await res.json()) as { tokens: number[] }).tokens;
}

/** A's view of B on GET /cluster (the fields read here). */
interface PeerRow {
  id: string;
  estimateTokens: number;
  liveness: string;
  suspected: boolean;
}

describe.skipIf(skip)("two nodes, each fronting its own real llama.cpp server", () => {
  const servers: LlamaServer[] = [];
  const nodes: NodeHandle[] = [];
  const client = (n: NodeHandle) =>
    new OpenAI({ baseURL: `${n.apiUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });

  beforeAll(async () => {
    servers.push(...(await Promise.all([startLlamaServer(), startLlamaServer()])));
    const pair = await startPair((i) => ({
      pollMs: "50",
      // A busy machine must not turn a slow ack into a fallback that serves the prompt at A.
      forwardAckTimeoutMs: "15000",
      // The paper's rule (longest estimated prefix): stories260K's prefill is so cheap that the
      // cost-aware default would rightly keep any prompt local.
      policy: "affinity",
      engine: "openai",
      // One URL the OpenAI way, one without: both must work.
      engineUrl: i === 0 ? `${servers[0]!.url}/v1` : servers[1]!.url,
      model: MODEL,
    }));
    nodes.push(...pair);
  });
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    await Promise.all(servers.map((s) => s.stop()));
  });

  it("forwards a prompt whose prefix B's server holds from A to B, which reports it cached", async () => {
    const [a, b] = nodes as [NodeHandle, NodeHandle];
    const prefix =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. " +
      "One day, she saw a big red ball under a tree. She ran to the ball and picked it up. " +
      "Her mom smiled and said they could play together until the sun went down behind the hills. ";
    const [first, second] = [`${prefix}Lily was happy.`, `${prefix}The sun was warm.`];
    // The tokens the two prompts share, as the server tokenizes them.
    const [t1, t2] = await Promise.all([first, second].map((p) => serverTokens(servers[1]!, p)));
    let shared = 0;
    while (shared < t1!.length && t1![shared] === t2![shared]) shared++;
    expect(shared).toBeGreaterThan(4 * BLOCK_SIZE);

    const warm = await client(b)
      .completions.create({ model: MODEL, prompt: first, max_tokens: 2 })
      .withResponse();
    expect(warm.response.headers.get("x-prefixmesh-served-by")).toBe("B");
    expect(warm.data.usage?.prompt_tokens).toBe(t1!.length);

    // A forwards once its estimate of B (from B's gossiped snapshot, whole blocks) covers the prefix.
    const sharedBlocks = Math.floor(shared / BLOCK_SIZE) * BLOCK_SIZE;
    const deadline = Date.now() + 30_000;
    for (;;) {
      const view = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as { peers: PeerRow[] };
      const peer = view.peers.find((p) => p.id === "B");
      if (peer && peer.estimateTokens >= sharedBlocks && peer.liveness === "live" && !peer.suspected) break;
      if (Date.now() > deadline) throw new Error(`A never learned B's tree: ${JSON.stringify(view)}`);
      await new Promise((r) => setTimeout(r, 25));
    }

    const { data, response } = await client(a)
      .completions.create({ model: MODEL, prompt: second, max_tokens: 2 })
      .withResponse();
    expect(response.headers.get("x-prefixmesh-served-by")).toBe("B");
    expect(response.headers.get("x-prefixmesh-hops")).toBe("1");
    // Reported by B's llama-server itself: the shared prefix was in its slot (the last shared
    // token may be evaluated again).
    const cached = data.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    expect(cached).toBeGreaterThanOrEqual(shared - 1);
    expect(cached).toBeLessThanOrEqual(shared);
    // The same prompt served at A's own (cold) server would have had nothing cached.
    const direct = await fetch(`${servers[0]!.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({ model: MODEL, prompt: second, max_tokens: 1 }),
    });
    const cold = (await direct.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } };
    expect(cold.usage.prompt_tokens_details.cached_tokens).toBe(0);
  });
});
