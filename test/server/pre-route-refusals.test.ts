/**
 * What answers before any route: a request on a closing server (503 in the port's shape), and, on
 * the shared-secret peer port, signed requests with a body and a method no route takes (404, or 405
 * with Allow for a known path: their signature is checked over the body they sent), while unsigned
 * ones are refused 401 before any route is looked at. Raw sockets, so HEAD answers are read byte-exact.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSecretFile, writeSecretFile } from "../../src/net/auth/secret.js";
import { hmacAuth } from "../../src/net/transport-auth.js";
import { createApiApp } from "../../src/server/openai/api-app.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { type RawRequest, send, sendBytes, shapeBreach } from "./fuzz-http.js";
import { soloNode } from "./helpers.js";

const DEADLINE_MS = 10_000;

/** Resolves once `cond` holds, polling; fails past the deadline. */
async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + DEADLINE_MS;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("a closing client port", () => {
  it("answers a request that arrives on a kept-alive connection 503 in OpenAI's shape", async () => {
    const app = createApiApp(undefined);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let entered = false;
    let closing = false;
    app.get("/slow", async () => {
      entered = true;
      await gate;
      return { ok: true };
    });
    // Runs after the app's own preClose hook (registered first): by then the app refuses.
    app.addHook("preClose", (done) => {
      closing = true;
      done();
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    const { port } = app.server.address() as import("node:net").AddressInfo;
    const socket = connect(port, "127.0.0.1");
    let got = "";
    socket.on("data", (d: Buffer) => {
      got += d.toString("latin1");
    });
    const closed = new Promise<void>((r) => socket.once("close", () => r()));
    socket.write("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    await until(() => entered, "the first request to be in its handler");
    const stopped = app.close();
    await until(() => closing, "the app to start closing");
    // The same connection, while its first request is still in flight: no route may serve this one.
    socket.write("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    release();
    await closed;
    await stopped;
    const second = got.indexOf("HTTP/1.1 503");
    expect(got).toMatch(/^HTTP\/1\.1 200/);
    expect(second).toBeGreaterThan(0);
    const answer = got.slice(second);
    expect(answer).toMatch(/\r\nretry-after: 1\r\n/i);
    const body = Buffer.from(answer.slice(answer.indexOf("\r\n\r\n") + 4), "latin1");
    expect(shapeBreach(body, "openai")).toBeUndefined();
  });
});

describe("shared-secret peer port: requests no route takes", () => {
  const dir = mkdtempSync(join(tmpdir(), "prefixmesh-refusals-"));
  let node: NodeHandle;
  let signAs: (r: RawRequest) => RawRequest;

  beforeAll(async () => {
    const secretFile = join(dir, "secret");
    await writeSecretFile(secretFile);
    ({ node } = await soloNode(undefined, { insecure: false, secretFile }));
    // B holds the cluster's secret but is no member of this node (it has none).
    const auth = hmacAuth("B", await loadSecretFile(secretFile));
    signAs = (r) => ({
      ...r,
      headers: auth.sign({
        method: r.method,
        path: r.path,
        body: r.body === undefined ? undefined : Buffer.from(r.body),
        to: "A",
        headers: {},
      }),
    });
  });
  afterAll(async () => {
    await node?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const METHODS = ["TRACE", "PROPFIND", "PURGE", "GET", "DELETE", "OPTIONS", "POST"];

  it("a signed request with a body and any method: 404 for an unknown path, 405 with Allow for a known one", async () => {
    for (const method of METHODS) {
      const body = '{"x":1}';
      const unknown = await send(node.peerUrl, signAs({ method, path: "/peer/nope", body }), DEADLINE_MS);
      expect([method, unknown.status]).toEqual([method, 404]);
      expect(shapeBreach(unknown.body, "peer")).toBeUndefined();
      if (method === "GET") continue; // GET /peer/hello is served
      const known = await send(node.peerUrl, signAs({ method, path: "/peer/hello", body }), DEADLINE_MS);
      expect([method, known.status]).toEqual([method, 405]);
      expect(known.headers.allow).toBe("GET, HEAD");
      expect(shapeBreach(known.body, "peer")).toBeUndefined();
    }
  });

  it("an unsigned request is refused 401 before any route is looked at", async () => {
    for (const method of METHODS) {
      for (const path of ["/peer/nope", "/peer/hello"]) {
        const a = await send(node.peerUrl, { method, path, body: '{"x":1}' }, DEADLINE_MS);
        expect([method, path, a.status]).toEqual([method, path, 401]);
        expect(shapeBreach(a.body, "peer")).toBeUndefined();
      }
    }
  });

  it("an upgrade: unsigned 401, signed to an unknown path 404, answered to HEAD without a body", async () => {
    const upgrade = { connection: "Upgrade", upgrade: "websocket" };
    const unsigned = await send(
      node.peerUrl,
      { method: "GET", path: "/peer/x", headers: upgrade },
      DEADLINE_MS,
    );
    expect(unsigned.status).toBe(401);
    expect(shapeBreach(unsigned.body, "peer")).toBeUndefined();
    const signed = signAs({ method: "HEAD", path: "/peer/x" });
    const head = `HEAD /peer/x HTTP/1.1\r\nHost: x\r\n${Object.entries({ ...signed.headers, ...upgrade })
      .map(([k, v]) => `${k}: ${v}`)
      .join("\r\n")}\r\n\r\n`;
    const a = await sendBytes(node.peerUrl, Buffer.from(head, "latin1"), DEADLINE_MS);
    expect(a.status).toBe(404);
    expect(Number(a.headers["content-length"])).toBeGreaterThan(0);
    expect(a.body.length).toBe(0);
  });
});
