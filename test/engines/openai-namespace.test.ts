/**
 * The remote engine passes a request's namespace on: `cache_salt` as vLLM's field of that name, and a
 * LoRA adapter as the request's `model` (vLLM serves adapters as models). Against a test double
 * that records what it was sent.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, it } from "vitest";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { closeDouble } from "./server-double.js";

let double: Server | undefined;
let engine: OpenAIEngine | undefined;
afterEach(async () => {
  await engine?.close();
  await closeDouble(double);
});

it("sends cache_salt and names the adapter as the model; neither when the request has none", async () => {
  const bodies: Record<string, unknown>[] = [];
  double = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      bodies.push(JSON.parse(body) as Record<string, unknown>);
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify({ choices: [{ text: "x", finish_reason: "stop" }] })}\n\n`);
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((r) => double?.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${(double.address() as AddressInfo).port}`;
  engine = new OpenAIEngine({ baseUrl: url, model: "base", backoffMs: 5 });
  const req = { id: "r", tokens: Uint32Array.of(1, 2), prompt: "p", maxTokens: 1 };
  await engine.run({ ...req, cacheSalt: "tenant-1", adapter: "sql-lora" });
  await engine.run(req);
  expect(bodies[0]).toMatchObject({ model: "sql-lora", cache_salt: "tenant-1" });
  expect(bodies[1]).toMatchObject({ model: "base" });
  expect(bodies[1]).not.toHaveProperty("cache_salt");
});
