/**
 * A completion or chat whose engine step fails before submit — its chat template, or its tokenize past
 * `--tokenize-timeout-ms` — is counted once in prefixmesh_requests_total (error, route none), as a
 * served one is (ok); a /tokenize, which serves nothing, is not counted.
 */
import { expect, it } from "vitest";
import type { ChatMessage, Tokens } from "../../src/core/engine.js";
import { EngineInputError } from "../../src/engines/errors.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { nodesStoppedAfterEach, soloNode, TestSimEngine } from "./helpers.js";

/** The simulator's engine whose chat template refuses the messages (a 400), or whose tokenize hangs until `release`. */
class FailingStepsDouble extends TestSimEngine {
  fault: "template" | "tokenize" | undefined;
  private readonly hung: (() => void)[] = [];
  override async tokenize(text: string): Promise<Tokens> {
    if (this.fault === "tokenize") await new Promise<void>((go) => this.hung.push(go));
    return super.tokenize(text);
  }
  override async applyChatTemplate(messages: ChatMessage[]): Promise<string> {
    if (this.fault === "template") throw new EngineInputError("template: unknown role", 400);
    return super.applyChatTemplate(messages);
  }
  release(): void {
    for (const go of this.hung.splice(0)) go();
  }
}

const keep = nodesStoppedAfterEach();

/** prefixmesh_requests_total summed by `outcome` (all routes). */
async function requestsBy(node: NodeHandle): Promise<Record<string, number>> {
  const text = await (await fetch(`${node.apiUrl}/metrics`)).text();
  const by: Record<string, number> = {};
  for (const m of text.matchAll(/^prefixmesh_requests_total\{([^}]*)\} (\S+)$/gm)) {
    const outcome = /outcome="([^"]*)"/.exec(m[1] ?? "")?.[1] ?? "";
    by[outcome] = (by[outcome] ?? 0) + Number(m[2]);
  }
  return by;
}

async function post(node: NodeHandle, path: string, body: object): Promise<number> {
  const r = await fetch(`${node.apiUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  await r.text();
  return r.status;
}

it("counts a request whose template or tokenize fails before submit once, as an error", async () => {
  const engine = new FailingStepsDouble();
  const { node, model } = await soloNode(engine, { tokenizeTimeoutMs: "200" });
  keep(node);
  const chat = { model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
  const completion = { model, prompt: "a question", max_tokens: 2 };
  const errors = (await requestsBy(node)).error ?? 0;

  engine.fault = "template";
  expect(await post(node, "/v1/chat/completions", chat)).toBe(400);
  expect((await requestsBy(node)).error).toBe(errors + 1);

  engine.fault = "tokenize";
  expect(await post(node, "/v1/completions", completion)).toBe(504);
  expect((await requestsBy(node)).error).toBe(errors + 2);
  // A /tokenize failing the same way is no completion: not counted.
  expect(await post(node, "/tokenize", { prompt: "a b" })).toBe(504);
  engine.fault = undefined;
  engine.release();

  const served = await requestsBy(node);
  expect(served.error).toBe(errors + 2);
  expect(await post(node, "/v1/completions", completion)).toBe(200);
  const after = await requestsBy(node);
  expect(after.ok ?? 0).toBe((served.ok ?? 0) + 1);
  expect(after.error).toBe(errors + 2);
}, 30_000);
