/**
 * A fake NodeService for the API tests only (one token per character; it answers "hello", served by
 * B) and the API over it, listening on 127.0.0.1 for a test file's suite.
 */
import type { FastifyInstance } from "fastify";
import OpenAI from "openai";
import { afterAll, beforeAll } from "vitest";
import type { ChatMessage, Tokens } from "../../src/core/engine.js";
import { type ApiOptions, buildApi } from "../../src/server/api.js";
import { createMetrics } from "../../src/server/metrics.js";
import {
  type InferenceInput,
  type NodeService,
  type ServeEvents,
  type ServeOutcome,
  ServiceError,
} from "../../src/server/service.js";

/** A fake service for API tests only: one token per character, echoes the prompt's length as output. */
export class FakeService implements NodeService {
  nodeId = "A";
  modelId = "fake-model";
  maxContextTokens = 256;
  lastInput: InferenceInput | undefined;
  overloaded = false;
  async tokenize(text: string): Promise<Tokens> {
    return Uint32Array.from([...text].map((c) => c.charCodeAt(0)));
  }
  async applyChatTemplate(messages: ChatMessage[]): Promise<string> {
    return messages.map((m) => `<${m.role}>${m.content}`).join("") + "<assistant>";
  }
  async submit(input: InferenceInput, events: ServeEvents): Promise<ServeOutcome> {
    this.lastInput = input;
    if (this.overloaded) throw new ServiceError(429, "rate_limit_error", "node overloaded", 2);
    const pieces = ["hel", "lo"];
    for (const p of pieces) events.onChunk?.(p, "B");
    return {
      reqId: "A-1",
      servedBy: "B",
      hops: 1,
      timing: { queueMs: 0.25, prefillMs: 1, decodeMs: 1, networkMs: 0.4567891, totalMs: 2.7067891 },
      fallbacks: 1,
      result: {
        text: pieces.join(""),
        completionTokens: 2,
        promptTokens: input.tokens.length,
        cachedTokens: 3,
        prefillMs: 1,
        decodeMs: 1,
        finishReason: "stop",
      },
    };
  }
  ready() {
    return { ok: true };
  }
  clusterView() {
    return { id: "A", peers: [] };
  }
}

/** The API a suite's tests call: its fake service, and its URL and OpenAI client once it listens. */
export interface FakeApi {
  service: FakeService;
  base: string;
  client: OpenAI;
}

/**
 * Builds the API over a new FakeService before the suite's tests and closes it after; call it inside
 * the suite's describe.
 */
export function fakeServiceApi(options: Omit<ApiOptions, "service" | "metrics"> = {}): FakeApi {
  const api = { service: new FakeService(), base: "" } as FakeApi;
  let app: FastifyInstance;
  beforeAll(async () => {
    app = buildApi({ service: api.service, metrics: createMetrics("A"), ...options });
    api.base = await app.listen({ host: "127.0.0.1", port: 0 });
    api.client = new OpenAI({ baseURL: `${api.base}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  afterAll(async () => {
    await app.close();
  });
  return api;
}
