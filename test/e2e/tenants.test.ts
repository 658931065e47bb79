/**
 * Tenants in real processes: two sim-engine nodes, and two tenants (`cache_salt`) sending the same
 * prompt. Each gets cached tokens only from its own earlier requests — on the node it entered and
 * across a forward — and the routing follows each tenant's own cached prefix.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BLOCK_SIZE } from "../../src/core/block-hash.js";
import { modelOf, postCompletion } from "../api-client.js";
import { waitFor, words } from "./helpers.js";
import { type SimNodes, startSimNodes } from "./sim-nodes.js";

const PREFIX = 400;

describe("tenants (cache_salt) between two node processes", () => {
  let nodes: SimNodes;
  let model: string;
  const ask = async (i: number, prompt: string, salt?: string, asModel = model) => {
    const res = await postCompletion(nodes.api[i] as string, {
      model: asModel,
      prompt,
      max_tokens: 1,
      ...(salt !== undefined ? { cache_salt: salt } : {}),
    });
    const body = (await res.json()) as {
      model: string;
      usage?: { prompt_tokens_details?: { cached_tokens?: number } };
    };
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.model).toBe(asModel);
    return {
      servedBy: res.headers.get("x-prefixmesh-served-by"),
      cached: body.usage?.prompt_tokens_details?.cached_tokens ?? 0,
    };
  };
  /** Node i's estimate of `peer` holds at least `tokens`. */
  const knows = (i: number, peer: string, tokens: number) =>
    waitFor(
      async () => {
        const v = (await (await fetch(`${nodes.api[i]}/cluster`)).json()) as {
          peers: { id: string; estimateTokens: number }[];
        };
        return (v.peers.find((p) => p.id === peer)?.estimateTokens ?? 0) >= tokens;
      },
      15_000,
      `node ${i}'s estimate of ${peer} to hold ${tokens} tokens`,
    );

  beforeAll(async () => {
    nodes = await startSimNodes(["A", "B"], () => [
      "--policy",
      "affinity",
      "--adapters",
      "sql-lora,chat-lora",
    ]);
    model = await modelOf(nodes.api[0] as string);
  }, 90_000);
  afterAll(async () => nodes?.stop());

  it("each tenant reuses only its own cached prefix, locally and across a forward", async () => {
    const prefix = words("tenant", PREFIX);
    // Tenant 1 fills B.
    expect(await ask(1, `${prefix} one`, "tenant-1")).toEqual({ servedBy: "B", cached: 0 });
    expect((await ask(1, `${prefix} two`, "tenant-1")).cached).toBeGreaterThanOrEqual(PREFIX);
    await knows(0, "B", PREFIX);
    // Tenant 2, same prompt, at A: nothing of B's is tenant 2's, so A serves it cold.
    expect(await ask(0, `${prefix} one`, "tenant-2")).toEqual({ servedBy: "A", cached: 0 });
    // …then reuses its own request at A.
    const again = await ask(0, `${prefix} three`, "tenant-2");
    expect(again.servedBy).toBe("A");
    expect(again.cached).toBeGreaterThanOrEqual(PREFIX);
    await knows(1, "A", PREFIX);
    // Across a forward: tenant 1 entering at A goes to B, tenant 2 entering at B goes to A.
    const t1 = await ask(0, `${prefix} four`, "tenant-1");
    expect(t1.servedBy).toBe("B");
    expect(t1.cached).toBeGreaterThanOrEqual(PREFIX);
    const t2 = await ask(1, `${prefix} five`, "tenant-2");
    expect(t2.servedBy).toBe("A");
    expect(t2.cached).toBeGreaterThanOrEqual(PREFIX);
    // No salt: neither tenant's cache is its, wherever it runs.
    expect((await ask(0, `${prefix} six`)).cached).toBeLessThan(BLOCK_SIZE);
  });

  it("a LoRA adapter, named as the model, is a namespace of its own", async () => {
    const prefix = words("adapter", PREFIX);
    expect((await ask(0, `${prefix} one`)).cached).toBe(0);
    expect((await ask(0, `${prefix} two`, undefined, "sql-lora")).cached).toBeLessThan(BLOCK_SIZE);
    expect((await ask(0, `${prefix} three`, undefined, "chat-lora")).cached).toBeLessThan(BLOCK_SIZE);
    expect((await ask(0, `${prefix} four`, undefined, "sql-lora")).cached).toBeGreaterThanOrEqual(PREFIX);
    const unknown = await postCompletion(nodes.api[0] as string, { model: "no-such-lora", prompt: "hi" });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe("model_not_found");
  });

  it("refuses a bad cache_salt with 400 and a JSON error", async () => {
    for (const bad of ["", "x".repeat(257), 42]) {
      const res = await postCompletion(nodes.api[0] as string, { model, prompt: "hi", cache_salt: bad });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { message: string; param: string } };
      expect(body.error.param).toBe("cache_salt");
    }
  });
});
