/** The test doubles of the request-log tests: a node service and a logger that keeps every line. */
import type { FastifyBaseLogger } from "fastify";
import type { Tokens } from "../../src/core/engine.js";
import {
  type InferenceInput,
  type NodeService,
  type ServeEvents,
  type ServeOutcome,
  ServiceError,
} from "../../src/server/service.js";

/** Test double of the node service: one token per character; prompts starting "fail" get a 502. */
export class FakeService implements NodeService {
  nodeId = "A";
  modelId = "m";
  maxContextTokens = 64;
  inputs: InferenceInput[] = [];
  /** Ends the requests held (prompt "hold…"): they answer nothing until then. */
  release: () => void = () => {};
  /** Shutting down: requests are refused as they are taken in. */
  stopping = false;
  admit() {
    if (this.stopping) throw new ServiceError(503, "server_error", "node is shutting down", 1);
    return { end() {} };
  }
  async tokenize(text: string): Promise<Tokens> {
    return Uint32Array.from([...text].map((c) => c.charCodeAt(0)));
  }
  async applyChatTemplate(): Promise<string> {
    return "x";
  }
  async submit(input: InferenceInput, events: ServeEvents): Promise<ServeOutcome> {
    this.inputs.push(input);
    if (input.prompt.startsWith("fail")) throw new ServiceError(502, "server_error", "all routes failed");
    if (input.prompt.startsWith("hold")) {
      await new Promise<void>((r) => {
        this.release = r;
      });
      throw new ServiceError(503, "server_error", "released");
    }
    events.onChunk?.("ok", "B");
    return {
      reqId: "A-1",
      servedBy: "B",
      hops: 1,
      timing: { queueMs: 1, prefillMs: 2, decodeMs: 3, networkMs: 4, totalMs: 10 },
      fallbacks: 0,
      result: {
        text: "ok",
        completionTokens: 1,
        promptTokens: input.tokens.length,
        cachedTokens: 5,
        prefillMs: 2,
        decodeMs: 3,
        finishReason: "stop",
      },
    };
  }
  readiness: { ok: boolean; detail?: string } = { ok: true };
  ready() {
    return this.readiness;
  }
  clusterView() {
    return {};
  }
}

export type Line = Record<string, unknown> & { msg: string; level: string };
/** A logger double that keeps every line. */
export function capture() {
  const lines: Line[] = [];
  const at =
    (level: string) =>
    (obj: object, msg = "") =>
      lines.push({ ...obj, msg, level } as Line);
  const logger = { info: at("info"), warn: at("warn"), error: at("error"), debug: at("debug") };
  return { lines, logger: logger as unknown as FastifyBaseLogger };
}
