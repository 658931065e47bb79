/**
 * A forward whose prompt plus output budget overflows the serving engine's context is refused at once
 * (retryable: the origin falls back), not run: the simulator, which does not check, decoded a peer's
 * whole budget of a million tokens into one answer.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { contextOverflow } from "../../src/server/runtime/peer-traffic.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { pair } from "./helpers.js";

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
    (l) => JSON.parse(l) as { t: string; msg?: { type: string; error?: string; retryable?: boolean } },
  );
}

describe("a forward larger than the engine's context", () => {
  let a: NodeHandle;
  let b: NodeHandle;
  beforeAll(async () => {
    [a, b] = await pair({ simTimeScale: "0.001" });
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

  it("counts the prompt and the whole output budget", () => {
    expect(contextOverflow({ tokens: { length: 90 }, maxTokens: 10 }, 100)).toBeUndefined();
    expect(contextOverflow({ tokens: { length: 90 }, maxTokens: 11 }, 100)).toMatch(
      /prompt \(90 tokens\) \+ maxTokens \(11\)/,
    );
  });
});
