import { connect, type Socket } from "node:net";
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { limitConnections } from "../../src/net/connection-limit.js";

const apps: FastifyInstance[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

/** A server whose one route counts the requests it served. */
async function server(max: number) {
  const app = Fastify();
  let served = 0;
  app.get("/", async () => ({ served: ++served }));
  const limit = { refused: 0 };
  limitConnections(app.server, max, {
    onRefused: () => limit.refused++,
    body: (message) => ({ error: { message, code: "too_many_connections" } }),
  });
  apps.push(app);
  await app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = app.server.address() as import("node:net").AddressInfo;
  return { port, limit, served: () => served };
}

/** Opens a raw connection, sends one request, and returns everything the server wrote until it closed (or 300 ms). */
function exchange(port: number, keepOpen: Socket[] = sockets): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    keepOpen.push(s);
    let got = "";
    s.on("data", (d) => {
      got += d.toString();
    });
    s.on("error", () => {});
    s.once("connect", () => s.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    s.once("close", () => resolve(got));
    setTimeout(() => resolve(got), 300);
  });
}

describe("connection limit", () => {
  it("answers connections over the limit with a 503 JSON error, and serves nothing on them", async () => {
    const { port, limit, served } = await server(2);
    const first = await exchange(port);
    const second = await exchange(port);
    expect(first).toMatch(/^HTTP\/1\.1 200/);
    expect(second).toMatch(/^HTTP\/1\.1 200/);
    const third = await exchange(port);
    expect(third).toMatch(/^HTTP\/1\.1 503/);
    expect(third).toMatch(/Retry-After: 1/);
    const body = JSON.parse(third.slice(third.indexOf("\r\n\r\n") + 4)) as { error: { code: string } };
    expect(body.error.code).toBe("too_many_connections");
    expect(served()).toBe(2); // the refused connection's request never reached a handler
    expect(limit.refused).toBe(1);
  });

  it("frees a place when a connection closes", async () => {
    const { port, limit } = await server(1);
    const held: Socket[] = [];
    expect(await exchange(port, held)).toMatch(/^HTTP\/1\.1 200/);
    expect(await exchange(port)).toMatch(/^HTTP\/1\.1 503/);
    for (const s of held) s.destroy();
    // The server sees the close a moment after the client: retry until the freed place is taken.
    for (let i = 0; ; i++) {
      const again = await exchange(port);
      if (/^HTTP\/1\.1 200/.test(again)) break;
      expect(again).toMatch(/^HTTP\/1\.1 503/);
      expect(i).toBeLessThan(20);
    }
    expect(limit.refused).toBeGreaterThanOrEqual(1);
  });
});
