import { connect, type Socket } from "node:net";
import Fastify, { type FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { clientAddressKey } from "../../src/net/client-address.js";
import { type ConnectionLimiter, limitConnections } from "../../src/net/connection-limit.js";
import { waitFor } from "../e2e/helpers.js";

const apps: FastifyInstance[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(apps.splice(0).map((a) => a.close()));
});

/** A server whose one route counts the requests it served. */
async function server(max: number, perAddress = max) {
  const app = Fastify();
  let served = 0;
  app.get("/", async () => ({ served: ++served }));
  const refused: string[] = [];
  const limiter: ConnectionLimiter = limitConnections(
    app.server,
    { max, perAddress },
    {
      onRefused: (reason) => refused.push(reason),
      body: (message) => ({ error: { message, code: "too_many_connections" } }),
    },
  );
  apps.push(app);
  await app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = app.server.address() as import("node:net").AddressInfo;
  return { port, refused, limiter, served: () => served };
}

/**
 * Opens a raw connection (from `from`, a loopback address), sends one request, and returns everything
 * the server wrote until it closed (or 300 ms).
 */
function exchange(
  port: number,
  keepOpen: Socket[] = sockets,
  from = "127.0.0.1",
  request: string | undefined = "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
  waitMs = 300,
): Promise<string> {
  return new Promise((resolve) => {
    const s = connect({ port, host: "127.0.0.1", localAddress: from });
    keepOpen.push(s);
    let got = "";
    s.on("data", (d) => {
      got += d.toString();
    });
    s.on("error", () => {});
    if (request !== undefined) s.once("connect", () => s.write(request));
    s.once("close", () => resolve(got));
    setTimeout(() => resolve(got), waitMs);
  });
}

/** Opens `n` idle connections from `from` and resolves once the server has admitted or refused each. */
async function idle(port: number, n: number, from: string, limiter: ConnectionLimiter, refused: string[]) {
  const before = limiter.stats().open + refused.length;
  const held = Array.from({ length: n }, () => {
    const s = connect({ port, host: "127.0.0.1", localAddress: from });
    s.on("error", () => {});
    sockets.push(s);
    return s;
  });
  const deadline = Date.now() + 10_000;
  while (limiter.stats().open + refused.length < before + n) {
    expect(Date.now()).toBeLessThan(deadline);
    await new Promise((r) => setTimeout(r, 10));
  }
  return held;
}

describe("connection limit", () => {
  it("answers connections over the limit with a 503 JSON error, and serves nothing on them", async () => {
    const { port, refused, served } = await server(2);
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
    expect(refused).toEqual(["limit"]);
  });

  it("answers a HEAD over the limit without a body, and a connection that sends nothing with one", async () => {
    const { port } = await server(1);
    expect(await exchange(port)).toMatch(/^HTTP\/1\.1 200/);
    // Each refusal closes its connection: the wait is only a bound.
    const head = await exchange(port, sockets, "127.0.0.1", "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", 10_000);
    expect(head).toMatch(/^HTTP\/1\.1 503/);
    expect(Number(/Content-Length: (\d+)/.exec(head)?.[1])).toBeGreaterThan(0);
    expect(head.endsWith("\r\n\r\n")).toBe(true); // nothing after the head
    const silent = await exchange(port, sockets, "127.0.0.1", undefined, 10_000);
    expect(silent).toMatch(/^HTTP\/1\.1 503/);
    const body = JSON.parse(silent.slice(silent.indexOf("\r\n\r\n") + 4)) as { error: { code: string } };
    expect(body.error.code).toBe("too_many_connections");
  });

  it("frees a place when a connection closes", async () => {
    const { port, refused } = await server(1);
    const held: Socket[] = [];
    expect(await exchange(port, held)).toMatch(/^HTTP\/1\.1 200/);
    expect(await exchange(port)).toMatch(/^HTTP\/1\.1 503/);
    for (const s of held) s.destroy();
    // The server sees the close a moment after the client: retry until the freed place is taken.
    await waitFor(
      async () => {
        const again = await exchange(port);
        if (/^HTTP\/1\.1 200/.test(again)) return true;
        expect(again).toMatch(/^HTTP\/1\.1 503/);
        return false;
      },
      10_000,
      "the freed place to be taken",
    );
    expect(refused.length).toBeGreaterThanOrEqual(1);
  });

  it("holds one address to its share, with 429, while another address is served", async () => {
    const { port, refused, limiter } = await server(100, 3);
    await idle(port, 5, "127.0.0.2", limiter, refused);
    expect(limiter.stats()).toEqual({ open: 3, perAddress: 3, addresses: 1 });
    expect(refused).toEqual(["per-address", "per-address"]);
    const over = await exchange(port, sockets, "127.0.0.2");
    expect(over).toMatch(/^HTTP\/1\.1 429/);
    expect(over).toMatch(/from your address \(limit 3\)/);
    expect(await exchange(port, sockets, "127.0.0.1")).toMatch(/^HTTP\/1\.1 200/);
  });

  it("stops counting a trusted connection against its address, but still in the total", async () => {
    const { port, refused, limiter } = await server(4, 2);
    const [a, b] = await idle(port, 2, "127.0.0.2", limiter, refused);
    limiter.trust({ remoteAddress: "127.0.0.1", remotePort: a!.localPort }); // not this socket's address
    expect(limiter.stats().perAddress).toBe(2);
    limiter.trust({ remoteAddress: "127.0.0.2", remotePort: a!.localPort });
    limiter.trust({ remoteAddress: "127.0.0.2", remotePort: b!.localPort });
    limiter.trust({ remoteAddress: "127.0.0.2", remotePort: b!.localPort }); // twice: counted once
    expect(limiter.stats()).toEqual({ open: 2, perAddress: 0, addresses: 0 });
    await idle(port, 2, "127.0.0.2", limiter, refused);
    expect(refused).toEqual([]);
    // The total still holds: a fifth connection, from anywhere, is refused.
    expect(await exchange(port, sockets, "127.0.0.3")).toMatch(/^HTTP\/1\.1 503/);
    expect(refused).toEqual(["limit"]);
  });

  it("refuses nonsense limits", () => {
    const app = Fastify();
    apps.push(app);
    expect(() => limitConnections(app.server, { max: 0, perAddress: 1 })).toThrow(RangeError);
    expect(() => limitConnections(app.server, { max: 10, perAddress: 0.5 })).toThrow(RangeError);
  });
});

describe("client address key", () => {
  it.each([
    ["192.0.2.1", "192.0.2.1"],
    ["::ffff:192.0.2.1", "192.0.2.1"],
    ["::FFFF:192.0.2.1", "192.0.2.1"],
    ["::ffff:c000:201", "192.0.2.1"],
    ["0:0:0:0:0:ffff:127.0.0.2", "127.0.0.2"],
    ["::1", "::1"],
    ["0:0:0:0:0:0:0:1", "::1"],
    ["2001:db8:1:2::5", "2001:db8:1:2::/64"],
    ["2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"],
    ["2001:db8::1", "2001:db8:0:0::/64"],
    ["fe80::1%eth0", "fe80:0:0:0::/64"],
    ["64:ff9b::192.0.2.1", "64:ff9b:0:0::/64"],
    [undefined, "unknown"],
  ])("%s counts as %s", (address, key) => {
    expect(clientAddressKey(address)).toBe(key);
  });

  it("keeps distinct /64s and distinct IPv4 addresses apart", () => {
    expect(clientAddressKey("2001:db8:1:2::1")).not.toBe(clientAddressKey("2001:db8:1:3::1"));
    expect(clientAddressKey("127.0.0.1")).not.toBe(clientAddressKey("127.0.0.2"));
    expect(clientAddressKey("::ffff:127.0.0.1")).toBe(clientAddressKey("127.0.0.1"));
  });
});
