/**
 * A JSON response whose body stalls after its headers (a TEST DOUBLE on 127.0.0.1): the body timeout
 * fires while json() reads it, past the request itself, and must still end as the engine's failure,
 * saying what the server did not do and for how long.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, expect, it } from "vitest";
import { EngineUnavailableError } from "../../src/engines/errors.js";
import { HttpClient } from "../../src/engines/http-client.js";

const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
});

it("a body that stalls after the headers: an engine failure naming the body timeout", async () => {
  const server = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.write('{"tokens": [1,');
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanup.push(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  );
  const client = new HttpClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, {
    connectTimeoutMs: 2_000,
    headersTimeoutMs: 2_000,
    bodyTimeoutMs: 200,
    retries: 0,
    backoffMs: 10,
    maxBackoffMs: 10,
  });
  cleanup.push(() => client.close());
  const failure = await client.json("POST", "/tokenize", { prompt: "p" }).catch((e: unknown) => e);
  expect(failure).toBeInstanceOf(EngineUnavailableError);
  const message = (failure as Error).message;
  expect(message).toMatch(/^POST http:\/\/127\.0\.0\.1:\d+\/tokenize: reading the response failed: /);
  expect(message).toMatch(/UND_ERR_BODY_TIMEOUT \(the server stopped sending mid-stream for 200 ms\)$/);
});
