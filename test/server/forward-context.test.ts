/**
 * A forward whose prompt plus output budget overflows the serving engine's context, or whose budget
 * exceeds the serving node's max_tokens ceiling, is refused at once (retryable: the origin falls
 * back), not run: the simulator, which does not check, decoded a peer's whole budget of a million
 * tokens into one answer. The refusal says the node's limits; its origin holds none of it against the
 * peer, and sends it no more requests that would not fit.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ceilingOverflow, contextOverflow } from "../../src/server/runtime/peer-traffic.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { postCompletion } from "../api-client.js";
import { openForwards, pair, routedPair } from "./helpers.js";

/** POSTs a forward to `node` as member B (insecure mode) and returns its answer stream's records. */
async function forward(node: NodeHandle, reqId: string, tokens: number, maxTokens: number) {
  const b64 = Buffer.from(new Uint32Array(tokens).fill(7).buffer).toString("base64");
  const body = { reqId, attempt: 0, hops: 1, request: { id: reqId, tokens: b64, prompt: "x", maxTokens } };
  const res = await fetch(`${node.peerUrl}/peer/forward`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-prefixmesh-sender": "B" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(20_000),
  });
  expect(res.status).toBe(200);
  const lines = (await res.text()).trim().split("\n");
  return lines.map(
    (l) =>
      JSON.parse(l) as {
        t: string;
        msg?: { type: string; error?: string; retryable?: boolean; limits?: Record<string, number> };
      },
  );
}

describe("a forward larger than the engine's context", () => {
  let a: NodeHandle;
  let b: NodeHandle;
  beforeAll(async () => {
    [a, b] = await pair({ simTimeScale: "0.001", maxTokensCeiling: "64" });
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it("is refused with a retryable error and no output; one that fits is served", async () => {
    const context = a.runtime.maxContextTokens;
    const refused = await forward(a, "ctx-over", 4, context);
    expect(refused).toHaveLength(1);
    expect(refused[0]?.msg?.type).toBe("error");
    expect(refused[0]?.msg?.retryable).toBe(true);
    expect(refused[0]?.msg?.error).toMatch(/exceeds this node's context of \d+ tokens/);
    const served = await forward(a, "ctx-fits", 4, 2);
    expect(served.at(-1)?.msg?.type).toBe("result");
  });

  it("past the node's max_tokens ceiling is refused the same way, saying the node's limits", async () => {
    const [refused] = await forward(a, "ceil-over", 4, 65);
    expect(refused?.msg).toMatchObject({ type: "error", retryable: true });
    expect(refused?.msg?.error).toMatch(/maxTokens \(65\) exceeds this node's max_tokens ceiling of 64$/);
    expect(refused?.msg?.limits).toEqual({ maxTokens: 64, contextTokens: a.runtime.maxContextTokens });
    expect((await forward(a, "ceil-fits", 4, 64)).at(-1)?.msg?.type).toBe("result");
    expect(ceilingOverflow({ maxTokens: 65 }, undefined)).toBeUndefined();
    // Refused and served alike, no forward's stream is left open here for its TTL sweep.
    expect(openForwards(a)).toBe(0);
  });

  it("counts each refusal by its reason in prefixmesh_forwards_refused_total", async () => {
    const refused = async (reason: string) => {
      const text = await (await fetch(`${a.apiUrl}/metrics`)).text();
      const line = new RegExp(
        `^prefixmesh_forwards_refused_total\\{[^}]*reason="${reason}"[^}]*\\} (\\d+)$`,
        "m",
      );
      const m = text.match(line);
      return Number(m?.[1] ?? 0);
    };
    const [context, ceiling] = [await refused("context"), await refused("ceiling")];
    await forward(a, "count-ctx", 4, a.runtime.maxContextTokens);
    await forward(a, "count-ceil", 4, 65);
    await forward(a, "count-fits", 4, 8);
    expect(await refused("context")).toBe(context + 1);
    expect(await refused("ceiling")).toBe(ceiling + 1);
  });

  it("counts the prompt and the whole output budget", () => {
    expect(contextOverflow({ tokens: { length: 90 }, maxTokens: 10 }, 100)).toBeUndefined();
    expect(contextOverflow({ tokens: { length: 90 }, maxTokens: 11 }, 100)).toMatch(
      /prompt \(90 tokens\) \+ maxTokens \(11\)/,
    );
  });
});

describe("a mesh whose nodes set different max_tokens ceilings", () => {
  const topic = (k: number) => Array.from({ length: 300 }, (_, i) => `ceil${k}w${i}`).join(" ");
  let nodes: NodeHandle[] = [];
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  });

  it("A serves what exceeds B's ceiling, keeps B trusted, and forwards B only what fits from then on", async () => {
    // B alone holds every topic, so A forwards each to B unless it knows it would not fit there.
    const { a, b, model } = await routedPair(
      topic(0),
      {},
      {
        own: { B: { maxTokensCeiling: "64" } },
        onStart: (x, y) => {
          nodes = [x, y];
        },
      },
    );
    for (let k = 1; k <= 4; k++)
      expect(
        (await postCompletion(b.apiUrl, { model, prompt: `${topic(k)} warm`, max_tokens: 1 })).status,
      ).toBe(200);
    const viewOfB = async () => {
      const v = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as {
        peers: BView[];
        stats: { forwarded: number };
      };
      return { b: v.peers[0] as BView, forwarded: v.stats.forwarded };
    };
    for (const deadline = Date.now() + 10_000; (await viewOfB()).b.estimateTokens < 5 * 256; )
      if (Date.now() > deadline) throw new Error("A never learned B's topics");
      else await new Promise((r) => setTimeout(r, 20));
    const ask = async (k: number, maxTokens: number) => {
      const r = await postCompletion(a.apiUrl, { model, prompt: `${topic(k)} asked`, max_tokens: maxTokens });
      expect(r.status).toBe(200);
      const body = (await r.json()) as { prefixmesh: { fallbacks: number } };
      return { by: r.headers.get("x-prefixmesh-served-by"), fallbacks: body.prefixmesh.fallbacks };
    };
    // Between the ceilings: B refuses, A serves it after one fallback.
    expect(await ask(0, 100)).toEqual({ by: "A", fallbacks: 1 });
    const after = await viewOfB();
    expect(after.b.trust).toMatchObject({ state: "closed", failures: 0, refusals: 0 });
    expect(after.b.limits).toMatchObject({ maxTokens: 64 });
    expect(after.forwarded).toBe(1);
    // Others like it are not sent to B at all; one that fits B still is.
    for (const k of [1, 2, 3]) expect(await ask(k, 100)).toEqual({ by: "A", fallbacks: 0 });
    expect(await ask(4, 8)).toEqual({ by: "B", fallbacks: 0 });
    const end = await viewOfB();
    expect(end.forwarded).toBe(2);
    expect(end.b.trust).toMatchObject({ state: "closed", failures: 0 });
  }, 60_000);
});

interface BView {
  estimateTokens: number;
  trust: { state: string; failures: number; refusals: number } | null;
  limits: { maxTokens?: number; contextTokens?: number } | null;
}
