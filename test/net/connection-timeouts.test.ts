import { createServer, type Server } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { limitConnections } from "../../src/net/connection-limit.js";
import {
  applyConnectionTimeouts,
  type ConnectionTimeouts,
  type TimeoutReason,
} from "../../src/net/connection-timeouts.js";

const servers: Server[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers) s.closeAllConnections();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A plain HTTP server with the bounds: `/` answers at once, `/slow` streams for `slowMs`. */
async function server(t: ConnectionTimeouts, slowMs = 0) {
  const srv = createServer((req, res) => {
    if (req.url === "/slow") {
      res.writeHead(200, { "content-type": "text/plain" });
      let n = 0;
      const tick = setInterval(() => {
        res.write(`${n}\n`);
        if (++n * 100 >= slowMs) {
          clearInterval(tick);
          res.end("done\n");
        }
      }, 100);
      return;
    }
    req.resume();
    req.on("end", () => res.end("ok"));
  });
  const closed: TimeoutReason[] = [];
  const watch = applyConnectionTimeouts(srv, t, (r) => closed.push(r));
  limitConnections(srv, { max: 100, perAddress: 100 }, { onAdmitted: watch });
  servers.push(srv);
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  return { port: (srv.address() as AddressInfo).port, closed };
}

/** A raw client socket: what it received, and when (ms after connecting) the server closed it. */
function client(port: number) {
  const s = connect(port, "127.0.0.1");
  sockets.push(s);
  const t0 = performance.now();
  const state = { got: "" };
  s.on("data", (d) => {
    state.got += d.toString();
  });
  s.on("error", () => {});
  const closedAfter = new Promise<number>((resolve) =>
    s.once("close", () => resolve(performance.now() - t0)),
  );
  const connected = new Promise<void>((r) => s.once("connect", () => r()));
  return { s, state, closedAfter, connected };
}

/** Rejects if `p` has not settled within `ms`: a bound on a wait that should end by itself. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

const T: ConnectionTimeouts = { idleMs: 300, headersMs: 800, requestMs: 1500, keepAliveMs: 400 };

describe("connection timeouts", () => {
  it("closes a connection that sends nothing after the idle timeout, and counts it", async () => {
    const { port, closed } = await server(T);
    const c = client(port);
    const after = await within(c.closedAfter, 10_000, "the silent connection to be closed");
    expect(after).toBeGreaterThanOrEqual(T.idleMs - 20);
    // The idle bound, not the headers one: told by the reason and the missing 408, not by the time
    // (a busy machine may fire the idle timer late).
    expect(c.state.got).toBe("");
    expect(closed).toEqual(["idle"]);
  });

  it("answers 408 and closes a connection whose headers trickle in (slow loris)", async () => {
    const { port, closed } = await server(T);
    const c = client(port);
    await c.connected;
    c.s.write("GET / HTTP/1.1\r\nHost: x\r\n");
    let i = 0;
    const drip = setInterval(() => c.s.writable && c.s.write(`X-Drip-${i++}: y\r\n`), 100);
    try {
      const after = await within(c.closedAfter, 10_000, "the slow-headers connection to be closed");
      expect(after).toBeGreaterThanOrEqual(T.headersMs - 20);
    } finally {
      clearInterval(drip);
    }
    expect(c.state.got).toMatch(/^HTTP\/1\.1 408/);
    expect(closed).toEqual(["timeout"]);
  });

  it("answers 408 to a request whose body does not arrive within the request timeout", async () => {
    const { port, closed } = await server(T);
    const c = client(port);
    await c.connected;
    c.s.write("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc");
    const after = await within(c.closedAfter, 10_000, "the slow-body connection to be closed");
    expect(after).toBeGreaterThanOrEqual(T.requestMs - 20);
    expect(c.state.got).toMatch(/^HTTP\/1\.1 408/);
    expect(closed).toEqual(["timeout"]);
  });

  it("lets an answer take longer than the request timeout, then closes the idle keep-alive", async () => {
    const { port, closed } = await server(T, T.requestMs + 500);
    const c = client(port);
    await c.connected;
    c.s.write("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
    await within(
      (async () => {
        while (!c.state.got.includes("done")) await new Promise((r) => setTimeout(r, 20));
      })(),
      10_000,
      "the whole slow answer",
    );
    const answered = performance.now();
    await within(c.closedAfter, 10_000, "the idle keep-alive connection to be closed");
    expect(performance.now() - answered).toBeGreaterThanOrEqual(T.keepAliveMs - 50);
    expect(c.state.got).toMatch(/^HTTP\/1\.1 200/);
    expect(closed).toEqual([]); // an answered, then idle, connection is not a refusal
  });

  it("serves a prompt client untouched, and is set before listening only", async () => {
    const { port } = await server(T);
    const c = client(port);
    await c.connected;
    c.s.write("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    await within(c.closedAfter, 10_000, "the answered connection to close");
    expect(c.state.got).toMatch(/^HTTP\/1\.1 200[\s\S]*ok$/);
    expect(() => applyConnectionTimeouts(servers[0]!, T)).toThrow(/before the server listens/);
    expect(() => applyConnectionTimeouts(createServer(), { ...T, idleMs: 0 })).toThrow(RangeError);
  });
});
