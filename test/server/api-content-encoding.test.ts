/**
 * A compressed request body (`content-encoding: gzip`) is not decoded: the client API says so with 415,
 * rather than reading the compressed bytes as JSON and answering "Body is not valid JSON".
 */
import { gzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { createApiApp } from "../../src/server/openai/api-app.js";
import { installErrorHandler } from "../../src/server/openai/api-errors.js";

describe("client API request content-encoding", () => {
  const app = createApiApp(undefined);
  installErrorHandler(app, undefined);
  app.post("/echo", async (req) => ({ got: req.body }));
  app.get("/plain", async () => ({ ok: true }));
  afterAll(() => app.close());
  const body = JSON.stringify({ model: "m", prompt: "a" });

  it("refuses a gzip body with 415 naming the encoding, in OpenAI's error shape", async () => {
    const res = await app.inject({
      method: "POST",
      url: "/echo",
      headers: { "content-type": "application/json", "content-encoding": "gzip" },
      payload: gzipSync(body),
    });
    expect(res.statusCode).toBe(415);
    const err = (res.json() as { error: { message: string; type: string } }).error;
    expect(err.type).toBe("invalid_request_error");
    expect(err.message).toMatch(/content-encoding 'gzip' is not supported/);
  });

  it("reads an identity-encoded body, and ignores the header on a request without one", async () => {
    const res = await app.inject({
      method: "POST",
      url: "/echo",
      headers: { "content-type": "application/json", "content-encoding": "identity" },
      payload: body,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ got: { model: "m", prompt: "a" } });
    const get = await app.inject({ method: "GET", url: "/plain", headers: { "content-encoding": "gzip" } });
    expect(get.statusCode).toBe(200);
  });
});
