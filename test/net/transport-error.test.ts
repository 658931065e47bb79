import { createServer, type Server } from "node:http";
import { request } from "node:https";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { classify } from "../../src/net/transport-error.js";

describe("classify: TLS to an address that answers in plain text", () => {
  let server: Server;
  let port = 0;
  beforeAll(async () => {
    // A plain HTTP server, as a node's API port is.
    server = createServer((_req, res) => res.end("plain"));
    await new Promise<void>((res) => server.listen(0, "127.0.0.1", res));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((res) => server.close(() => res())));

  it("names the likely mistake (an API port, or a node without TLS), not OpenSSL's record error", async () => {
    const err = await new Promise<unknown>((res) => {
      const req = request({ host: "127.0.0.1", port, path: "/peer/hello", rejectUnauthorized: false });
      req.on("error", res);
      req.on("response", () => res(new Error("answered over TLS")));
      req.end();
    });
    const t = classify(err);
    expect(t.kind).toBe("connection");
    expect(t.message).toMatch(/answers without TLS.*--listen.*--peer-listen/);
    expect(t.message).not.toMatch(/ssl3_get_record/);
  });
});
