/**
 * What answers before any route: a request on a closing server (503 in the port's shape). Raw
 * sockets, so answers are read byte-exact.
 */
import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { createApiApp } from "../../src/server/openai/api-app.js";
import { shapeBreach } from "./fuzz-http.js";

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
