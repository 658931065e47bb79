/**
 * The peer port's connection bounds: strangers get a small share per address and are cut off when
 * idle or slow, while a member's connections — its pool and its forward channel — leave that share
 * once they carry its authenticated requests (peers behind one NAT address are many members on one
 * address), in shared-secret and mutual-TLS mode alike.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { opensslAvailable } from "../../src/net/auth/openssl.js";
import { loadTlsMaterial } from "../../src/net/auth/tls.js";
import type { PeerServerHandlers } from "../../src/net/peer-handlers.js";
import type { ForwardReplyStream } from "../../src/net/reply-stream.js";
import { hmacAuth, mtlsAuth, type PeerAuth } from "../../src/net/transport-auth.js";
import { type ForwardTransport, PeerClient } from "../../src/net/transport-client.js";
import { buildPeerServer, type PeerConnectionBounds } from "../../src/net/transport-server.js";
import { type ForwardMsg, PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { fwd, resultFor, SECRET, snapshotMsg } from "./fixtures.js";

const servers: FastifyInstance[] = [];
const clients: PeerClient[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** Polls `cond` every 10 ms until it holds, failing after `ms`. */
async function until(cond: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const BOUNDS: PeerConnectionBounds = {
  limits: { max: 64, perAddress: 2 },
  timeouts: { idleMs: 300, headersMs: 800, requestMs: 2000 },
};

/** Node B's peer port; forwards are held open until `release()`, so each keeps a connection busy. */
async function peerPort(auth: PeerAuth, bounds = BOUNDS) {
  const closed: string[] = [];
  const held: { msg: ForwardMsg; reply: ForwardReplyStream }[] = [];
  const handlers: PeerServerHandlers = {
    hello: () => ({ id: "B", cluster: "c1", model: "m", protocol: PROTOCOL_VERSION }),
    isKnownPeer: (id) => id === "A",
    onMessage() {},
    onForward(_from, msg, reply) {
      held.push({ msg, reply });
    },
  };
  const server = buildPeerServer({
    auth,
    handlers,
    connections: bounds,
    onConnectionClosed: (r) => closed.push(r),
  });
  servers.push(server);
  const url = await server.listen({ host: "127.0.0.1", port: 0 });
  const port = Number(new URL(url).port);
  const release = () => {
    for (const h of held.splice(0)) h.reply.finish(resultFor(h.msg, "ok"));
  };
  return { url, port, closed, held, release };
}

function member(auth: PeerAuth, url: string, transport: ForwardTransport) {
  const c = new PeerClient({ auth, forwardTransport: transport });
  clients.push(c);
  c.setPeer("B", url);
  return c;
}

/** A stranger's raw socket from 127.0.0.1; resolves with what it got once the server closed it. */
function stranger(port: number, send?: string) {
  const s = connect(port, "127.0.0.1");
  sockets.push(s);
  s.on("error", () => {});
  let got = "";
  s.on("data", (d) => {
    got += d.toString();
  });
  if (send !== undefined) s.once("connect", () => s.write(send));
  return { s, closed: new Promise<string>((r) => s.once("close", () => r(got))) };
}

describe("peer port connections (shared secret)", () => {
  it("lets a member hold more connections than an address's share; strangers get the share", async () => {
    const b = await peerPort(hmacAuth("B", SECRET));
    const http = member(hmacAuth("A", SECRET), b.url, "http");
    const channel = member(hmacAuth("A", SECRET), b.url, "channel");
    // One at a time (each is authenticated, so trusted, before the next opens): 5 HTTP forwards held
    // open, each on its own pool connection, and one on the forward channel: 6 from 127.0.0.1.
    const answers: Promise<unknown>[] = [];
    for (let i = 0; i < 5; i++) {
      answers.push(http.forward("B", fwd(`A-${i}`), () => {}));
      await until(() => b.held.length === i + 1, 10_000, `forward ${i} to reach B`);
    }
    answers.push(channel.forward("B", fwd("A-ch"), () => {}));
    await until(() => b.held.length === 6, 10_000, "the channel forward to reach B");
    // Strangers from the same address: two admitted (and cut off when idle), the third refused.
    const s1 = stranger(b.port);
    const s2 = stranger(b.port);
    await until(() => s1.s.readyState === "open" && s2.s.readyState === "open", 10_000, "connect");
    expect(b.closed).toEqual([]);
    const s3 = stranger(b.port, "GET /peer/hello HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(await s3.closed).toMatch(/^HTTP\/1\.1 429/);
    await Promise.all([s1.closed, s2.closed]);
    expect(b.closed.sort()).toEqual(["idle", "idle", "per-address"]);
    // The member kept every connection and gets every answer.
    b.release();
    for (const a of await Promise.all(answers)) expect(a).toMatchObject({ type: "result" });
    expect(await http.send("B", snapshotMsg([1]))).toBeGreaterThan(0);
  });

  it("answers a stranger's trickled headers with 408 and closes it, counted", async () => {
    const b = await peerPort(hmacAuth("B", SECRET));
    const s = stranger(b.port, "POST /peer/snapshot HTTP/1.1\r\nHost: x\r\n");
    const drip = setInterval(() => s.s.writable && s.s.write("X-Drip: y\r\n"), 100);
    try {
      expect(await s.closed).toMatch(/^HTTP\/1\.1 408/);
    } finally {
      clearInterval(drip);
    }
    expect(b.closed).toEqual(["timeout"]);
  });

  it("does not trust a connection for a hello alone (it needs no membership)", async () => {
    const b = await peerPort(hmacAuth("B", SECRET), { ...BOUNDS, limits: { max: 64, perAddress: 1 } });
    // A signed hello from a non-member is answered, but its connection keeps counting: with a share
    // of 1, a second connection from the address is refused while it stays open.
    const outsider = new PeerClient({ auth: hmacAuth("Z", SECRET) });
    clients.push(outsider);
    outsider.setPeer("B", b.url);
    expect(await outsider.hello("B")).toMatchObject({ id: "B" });
    const s = stranger(b.port, "GET /peer/hello HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(await s.closed).toMatch(/^HTTP\/1\.1 429/);
  });
});

const haveOpenssl = await opensslAvailable();
if (!haveOpenssl) console.log("skipped mutual-TLS peer port connection tests: openssl not installed");
describe.skipIf(!haveOpenssl)("peer port connections (mutual TLS)", () => {
  let dir: string | undefined;
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("closes a stranger's silent or stalled handshake, refuses over the share, serves the member", async () => {
    dir = mkdtempSync(join(tmpdir(), "pm-peerconn-"));
    await initCa(dir, { clusterId: "c1" });
    await issueNodeCert(dir, "A");
    await issueNodeCert(dir, "B");
    const [a, bTls] = await Promise.all([loadTlsMaterial(dir, "A"), loadTlsMaterial(dir, "B")]);
    const b = await peerPort(mtlsAuth(bTls));
    const http = member(mtlsAuth(a), b.url, "http");
    // One at a time, as above: three pool connections held open, more than the share of 2.
    const answers: Promise<unknown>[] = [];
    for (let i = 0; i < 3; i++) {
      answers.push(http.forward("B", fwd(`A-${i}`), () => {}));
      await until(() => b.held.length === i + 1, 10_000, `forward ${i} to reach B`);
    }
    // Silent sockets: two admitted and closed when idle, a third refused before any handshake.
    const silent = [stranger(b.port), stranger(b.port), stranger(b.port)];
    await Promise.all(silent.map((s) => s.closed));
    expect(b.closed.sort()).toEqual(["idle", "idle", "per-address"]);
    // A handshake begun (a TLS record header promising more) and never finished: the idle bound
    // does not apply (a byte came), the handshake bound does.
    const stalled = stranger(b.port, "\x16\x03\x01\x00\xff");
    await stalled.closed;
    expect(b.closed.sort()).toEqual(["idle", "idle", "per-address", "timeout"]);
    // The member's connections outlived all of it.
    b.release();
    for (const r of await Promise.all(answers)) expect(r).toMatchObject({ type: "result" });
  });
});
