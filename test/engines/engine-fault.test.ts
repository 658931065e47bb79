/**
 * Whose fault an engine's failure is (`engineFault`): a remote server's 408 request timeout, like its
 * 429 and 503, is the server busy for now (`load`), retried and never read as the engine's setup.
 * The server is a TEST DOUBLE on 127.0.0.1.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { EngineInputError, EngineUnavailableError, engineFault } from "../../src/engines/errors.js";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { closedAfterEach } from "./server-double.js";

const live = closedAfterEach<OpenAIEngine>();

describe("engineFault", () => {
  it.each([
    [new EngineInputError("bad prompt"), "input"],
    [new EngineInputError("HTTP 400", 400), "input"],
    [new EngineInputError("HTTP 401", 401), "setup"],
    [new EngineInputError("HTTP 404", 404), "setup"],
    [new EngineInputError("HTTP 408", 408), "load"],
    [new EngineUnavailableError("HTTP 408", 408), "load"],
    [new EngineUnavailableError("HTTP 429", 429, 2_000), "load"],
    [new EngineUnavailableError("HTTP 503", 503), "load"],
    [new EngineUnavailableError("HTTP 500", 500), "down"],
    [new EngineUnavailableError("ECONNREFUSED"), "down"],
    [new Error("a bug"), undefined],
  ] as const)("%s: %s", (err, fault) => {
    expect(engineFault(err)).toBe(fault);
  });
});

describe("a server answering 408 (test double)", () => {
  it("is retried, then a load failure, not a setup one", async () => {
    let seen = 0;
    live.double = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        seen++;
        res.writeHead(408, { "content-type": "application/json" }).end('{"error":"request timeout"}');
      });
    });
    await new Promise<void>((r) => live.double!.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(live.double!.address() as AddressInfo).port}`;
    live.engine = new OpenAIEngine({ baseUrl: url, model: "m", retries: 1, backoffMs: 5, maxBackoffMs: 20 });
    const err = await live.engine
      .run({ id: "r", tokens: Uint32Array.of(1, 2, 3), prompt: "p", maxTokens: 4 })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineUnavailableError);
    expect(String((err as Error).message)).toMatch(/HTTP 408/);
    expect(engineFault(err)).toBe("load");
    expect(seen).toBe(2);
  });
});
