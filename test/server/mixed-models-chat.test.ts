/**
 * A chat for another model is rendered with the SERVING node's chat template, not the entry node's:
 * two in-process nodes serving two models (`--mixed-models`), each engine a test double (the
 * simulated engine with a chat template of its own model, recording the prompts it runs). A chat for
 * model 2 entering at model 1's node is forwarded with its messages, and model 2's node renders them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatMessage, EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import { resolveProfile } from "../../src/engines/sim/profiles.js";
import { SimEngine } from "../../src/engines/sim/sim-engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { startPair } from "../node-pair.js";

/** Test double: the simulated engine, with a chat template naming its model; records what it runs. */
class TemplatedSimEngine extends SimEngine {
  readonly prompts: string[] = [];
  override async applyChatTemplate(messages: ChatMessage[]): Promise<string> {
    return `[${this.info.model}] ${messages.map((m) => `${m.role}: ${m.content}`).join(" | ")} [/${this.info.model}]`;
  }
  override run(
    req: EngineRequest,
    onChunk?: (c: EngineChunk) => void,
    signal?: AbortSignal,
  ): Promise<EngineResult> {
    if (req.prompt !== undefined) this.prompts.push(req.prompt);
    return super.run(req, onChunk, signal);
  }
}

describe("chat templates in a mesh of mixed models", () => {
  const engines = [
    new TemplatedSimEngine({ profile: resolveProfile("paper-h100-qwen0.5b"), timeScale: 0.01 }),
    new TemplatedSimEngine({ profile: resolveProfile("cpu-llamacpp"), timeScale: 0.01 }),
  ];
  const nodes: NodeHandle[] = [];

  beforeAll(async () => {
    const settings = {
      pollMs: "50",
      // A busy machine must not turn a slow ack into a second attempt.
      forwardAckTimeoutMs: "15000",
      engine: "sim",
      mixedModels: true,
      // The test engines record every prompt they run: no calibration runs among them.
      calibrationMs: "0",
    };
    nodes.push(...(await startPair(() => settings, engines)));
  });
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  });

  it("renders a forwarded chat with the serving node's template", async () => {
    const [a] = nodes as [NodeHandle, NodeHandle];
    const model = engines[1]!.info.model;
    // A routes the model once B's hello came (its models) and B is live.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const list = (await (await fetch(`${a.apiUrl}/v1/models`)).json()) as { data: { id: string }[] };
      const view = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as {
        peers: { id: string; liveness: string }[];
      };
      const live = view.peers.some((p) => p.id === "B" && p.liveness === "live");
      if (live && list.data.some((m) => m.id === model)) break;
      if (Date.now() > deadline) throw new Error(`A never learned B's model: ${JSON.stringify(list)}`);
      await new Promise((r) => setTimeout(r, 25));
    }
    const chat = () =>
      fetch(`${a.apiUrl}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model,
          messages: [
            { role: "system", content: "be brief" },
            { role: "user", content: "hello there" },
          ],
          max_tokens: 2,
        }),
      });
    // On a loaded machine B may be suspected for a moment (503, nothing run): until it is reachable.
    const until = Date.now() + 30_000;
    let res = await chat();
    while (res.status === 503 && Date.now() < until) {
      await res.body?.cancel();
      await new Promise((r) => setTimeout(r, 50));
      res = await chat();
    }
    const body = (await res.json()) as { usage?: { prompt_tokens?: number } };
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(res.headers.get("x-prefixmesh-served-by")).toBe("B");
    const rendered = `[${model}] system: be brief | user: hello there [/${model}]`;
    // Every run at B (a retried attempt included) had B's rendering; A ran nothing.
    expect(engines[1]!.prompts.length).toBeGreaterThan(0);
    expect(new Set(engines[1]!.prompts)).toEqual(new Set([rendered]));
    expect(engines[0]!.prompts).toEqual([]);
    // Usage counts the prompt B ran: B's template, tokenized by B.
    expect(body.usage?.prompt_tokens).toBe((await engines[1]!.tokenize(rendered)).length);
  });
});
