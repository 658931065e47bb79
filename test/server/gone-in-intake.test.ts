/**
 * A client that hangs up while its prompt is still being tokenized: its request is not submitted (no
 * engine would run it for anybody, nor would it hold a --max-pending slot meanwhile), and its
 * admission ends; a chat client gone while its template is applied is not even tokenized. A fake
 * service (API tests only) holds the tokenize, or the template, until the test lets it go.
 */
import { request } from "node:http";
import type { FastifyInstance } from "fastify";
import { afterEach, expect, it } from "vitest";
import type { ChatMessage, Tokens } from "../../src/core/engine.js";
import { buildApi } from "../../src/server/api.js";
import { createMetrics } from "../../src/server/metrics.js";
import type { Admission, NodeService, ServeOutcome } from "../../src/server/service.js";
import { waitFor } from "../e2e/helpers.js";

class HeldService implements NodeService {
  nodeId = "A";
  modelId = "m";
  maxContextTokens = 256;
  open = 0;
  submits = 0;
  tokenizes = 0;
  /** Hold the chat template instead of the tokenize. */
  holdTemplate = false;
  held: (() => void)[] = [];
  admit(): Admission {
    this.open++;
    return { end: () => this.open-- };
  }
  async tokenize(text: string): Promise<Tokens> {
    this.tokenizes++;
    if (!this.holdTemplate) await new Promise<void>((go) => this.held.push(go));
    return Uint32Array.from([...text].map((c) => c.charCodeAt(0)));
  }
  async applyChatTemplate(messages: ChatMessage[]): Promise<string> {
    if (this.holdTemplate) await new Promise<void>((go) => this.held.push(go));
    return messages.map((m) => m.content).join("");
  }
  async submit(): Promise<ServeOutcome> {
    this.submits++;
    throw new Error("a test double that serves nothing");
  }
  ready() {
    return { ok: true };
  }
  clusterView() {
    return {};
  }
}

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

/** Posts `body` to `path` of a fresh API over `service`, and hangs up once a step of it is held. */
async function hangUpWhileHeld(service: HeldService, path: string, body: object): Promise<void> {
  app = buildApi({ service, metrics: createMetrics("A") });
  const base = await app.listen({ host: "127.0.0.1", port: 0 });
  // node:http, not fetch: its destroy closes the socket at once (fetch keeps it a while).
  const req = request(`${base}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    agent: false,
  });
  req.on("error", () => {});
  req.end(JSON.stringify(body));
  await waitFor(() => service.held.length === 1, 10_000, "the step to be held");
  req.destroy();
  const server = app.server;
  const connections = () => new Promise<number>((r) => server.getConnections((_e, n) => r(n)));
  await waitFor(async () => (await connections()) === 0, 10_000, "the server to see the hang-up");
  service.held[0]?.();
  await waitFor(() => service.open === 0, 10_000, "the admission to end");
}

it.each([false, true])(
  "does not submit a request whose client hung up while it tokenized (stream: %s)",
  async (stream) => {
    const service = new HeldService();
    await hangUpWhileHeld(service, "/v1/completions", { model: "m", prompt: "abc", max_tokens: 1, stream });
    expect(service.submits).toBe(0);
  },
);

it("does not tokenize a chat whose client hung up while its template was applied", async () => {
  const service = new HeldService();
  service.holdTemplate = true;
  await hangUpWhileHeld(service, "/v1/chat/completions", {
    model: "m",
    messages: [{ role: "user", content: "abc" }],
    max_tokens: 1,
  });
  expect([service.tokenizes, service.submits]).toEqual([0, 0]);
});
