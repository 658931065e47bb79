import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ClusterInfo, clusterTmp, type Spawned, spawnCli, waitFor } from "./helpers.js";

type Usage = { prompt_tokens_details?: { cached_tokens?: number } };

/** Smoke test of the real path: embedded llama.cpp with the tiny generated model, 2 nodes, mTLS. */
describe("2-node llama.cpp cluster (generated tiny model)", () => {
  let cluster: Spawned;
  let info: ClusterInfo;
  const tmp = clusterTmp();
  const client = (i: number) =>
    new OpenAI({ baseURL: `${info.nodes[i]?.apiUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });

  beforeAll(async () => {
    cluster = spawnCli(
      [
        "cluster",
        "--nodes",
        "2",
        "--engine",
        "llamacpp",
        "--model",
        "generated:tiny",
        "--poll-ms",
        "100",
        // The smoke test checks the forward path, so it names the policy that always takes it. The
        // default (cost-aware) may rightly keep this ~300-token prefix local: the tiny model's prefill
        // of it costs less than expected reuse × a loaded machine's loopback RTT.
        "--policy",
        "affinity",
        "--json",
      ],
      tmp.env,
    );
    info = JSON.parse(await cluster.waitForLine(/"ready":true/, 120_000)) as ClusterInfo;
  });
  afterAll(async () => {
    if (cluster?.child.exitCode === null) {
      cluster.child.kill("SIGTERM");
      await cluster.exited;
    }
    tmp.remove();
  });

  it("answers completions, chat and streams, and forwards to the node caching the prefix", async () => {
    const model = (await client(0).models.list()).data[0]?.id as string;
    const chat = await client(0).chat.completions.create({
      model,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 3,
    });
    expect(chat.usage?.completion_tokens).toBeGreaterThan(0);
    const stream = await client(0).completions.create({
      model,
      prompt: "Once upon a time",
      max_tokens: 3,
      stream: true,
    });
    let chunks = 0;
    for await (const _c of stream) chunks++;
    expect(chunks).toBeGreaterThan(0);

    const prefix = "The quick brown fox jumps over the lazy dog. ".repeat(30);
    const warm = await client(1)
      .completions.create({ model, prompt: `${prefix}first`, max_tokens: 1 })
      .withResponse();
    expect(warm.response.headers.get("x-prefixmesh-served-by")).toBe("B");
    await waitFor(
      async () => {
        const v = (await (await fetch(`${info.nodes[0]?.apiUrl}/cluster`)).json()) as {
          peers: { estimateTokens: number }[];
        };
        return (v.peers[0]?.estimateTokens ?? 0) >= 256;
      },
      10_000,
      "A's estimate of B",
    );
    const { data, response } = await client(0)
      .completions.create({ model, prompt: `${prefix}second`, max_tokens: 1 })
      .withResponse();
    expect(response.headers.get("x-prefixmesh-served-by")).toBe("B");
    expect((data.usage as Usage).prompt_tokens_details?.cached_tokens).toBeGreaterThan(256);
  });
});
