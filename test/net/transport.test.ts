import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { encodeSnapshot } from "../../src/core/snapshot-codec.js";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { opensslAvailable } from "../../src/net/auth/openssl.js";
import { loadTlsMaterial, type TlsMaterial } from "../../src/net/auth/tls.js";
import { checkPeerHello } from "../../src/net/discovery.js";
import type { PeerServerHandlers } from "../../src/net/peer-handlers.js";
import { hmacAuth, insecureAuth, mtlsAuth, type PeerAuth } from "../../src/net/transport-auth.js";
import { type ForwardTransport, PeerClient, TransportError } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import {
  type ForwardMsg,
  type LoneMessage,
  PROMPT_TEXT_NEEDED,
  PROTOCOL_VERSION,
  type SnapshotMsg,
} from "../../src/net/transport-wire.js";
import { fwd, resultFor, SECRET, signed, snapshotMsg } from "./fixtures.js";

/** Fake node handlers recording what the transport delivered; forwards answer "ok" in two chunks. */
function fakeHandlers(selfId: string) {
  const log = {
    snapshots: [] as { from: string; msg: SnapshotMsg; wireBytes: number }[],
    messages: [] as { from: string; msg: LoneMessage }[],
    forwards: [] as ForwardMsg[],
    rejected: [] as string[],
  };
  const handlers: PeerServerHandlers = {
    hello: () => ({ id: selfId, cluster: "c1", model: "m", protocol: PROTOCOL_VERSION }),
    isKnownPeer: (id) => id !== "stranger",
    onMessage(from, msg, wireBytes) {
      if (msg.type === "snapshot") log.snapshots.push({ from, msg, wireBytes });
      else log.messages.push({ from, msg });
    },
    onForward(_from, msg, reply) {
      log.forwards.push(msg);
      reply.chunk("o");
      reply.chunk("k");
      reply.finish(resultFor(msg, "ok", selfId));
    },
    onAuthRejected: (r) => log.rejected.push(r),
  };
  return { log, handlers };
}

const servers: FastifyInstance[] = [];
const clients: PeerClient[] = [];
const raws: Server[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
  for (const r of raws) r.closeAllConnections();
  await Promise.all(raws.splice(0).map((r) => new Promise((done) => r.close(done))));
});

async function start(
  auth: PeerAuth,
  self = "B",
  maxSnapshotBytes?: number,
  onForward?: PeerServerHandlers["onForward"],
) {
  const { log, handlers } = fakeHandlers(self);
  if (onForward) handlers.onForward = onForward;
  const server = buildPeerServer({ auth, handlers, ...(maxSnapshotBytes ? { maxSnapshotBytes } : {}) });
  servers.push(server);
  // What reached the server at all, before authentication: requests to the HTTP forward route, and
  // connections.
  const wire = { httpForwards: 0, connections: 0 };
  server.server.on("request", (req: { url?: string }) => {
    if (req.url === "/peer/forward") wire.httpForwards++;
  });
  const url = await server.listen({ host: "127.0.0.1", port: 0 });
  server.server.on("connection", () => wire.connections++);
  return { url, log, wire };
}

/**
 * How node A (`clientAuth`) judges the hello of a test double B (`serverAuth`) answering `hello`:
 * the double stands for an older or a later build, whose hello alone says so.
 */
async function judgeHello(serverAuth: PeerAuth, clientAuth: PeerAuth, hello: PeerServerHandlers["hello"]) {
  const { handlers } = fakeHandlers("B");
  handlers.hello = hello;
  const server = buildPeerServer({ auth: serverAuth, handlers });
  servers.push(server);
  const c = client(clientAuth);
  c.setPeer("B", await server.listen({ host: "127.0.0.1", port: 0 }));
  return checkPeerHello(
    { cluster: "c1", model: "m", self: "A", peerId: "B", authMode: c.authMode },
    await c.hello("B"),
  );
}
/** The hello of a protocol 2 node (a test double, not a real old build). */
const protocol2Double = () => ({ id: "B", cluster: "c1", model: "m", protocol: 2 });
/** The hello of a later node speaking protocol 4 that still speaks 3 (a test double). */
const laterDouble = () => ({ id: "B", cluster: "c1", model: "m", protocol: 4, minProtocol: 3 });

function client(auth: PeerAuth, timeouts = {}, forwardTransport: ForwardTransport = "channel") {
  const c = new PeerClient({ auth, timeouts, forwardTransport });
  clients.push(c);
  return c;
}

/** A plain HTTP server scripted to misbehave as a peer; closed after each test. */
async function rawPeer(handler: RequestListener): Promise<string> {
  const srv = createServer(handler);
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  raws.push(srv);
  return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
}

describe("peer transport (HMAC shared secret)", () => {
  // Forwards default to the channel (test/net/forward-channel.test.ts); these go over HTTP so the
  // server's POST /peer/forward route is exercised too.
  it("streams a forwarded request (HTTP transport) back chunk by chunk with its final result", async () => {
    const { url, log, wire } = await start(hmacAuth("B", SECRET));
    const c = client(hmacAuth("A", SECRET), {}, "http");
    c.setPeer("B", url);
    const chunks: string[] = [];
    const reply = await c.forward("B", fwd("A-1"), (t) => chunks.push(t));
    expect(chunks).toEqual(["o", "k"]);
    expect(reply).toMatchObject({ type: "result", reqId: "A-1", result: { text: "ok", promptTokens: 4 } });
    expect([...(log.forwards[0]?.request.tokens ?? [])]).toEqual([1, 2, 3, 4_000_000_000]);
    // Keep-alive pool: three requests, fewer connections. A forward resolves at its final record, a
    // moment before its connection is released, so the second forward may open a second one; the
    // hello then finds one idle.
    await c.forward("B", fwd("A-2"), () => {});
    expect(log.forwards).toHaveLength(2);
    expect(await c.hello("B")).toMatchObject({ id: "B" });
    expect(wire.httpForwards).toBe(2);
    expect(wire.connections).toBeLessThan(3);
  });

  it("delivers snapshots with the holds ack, and messages", async () => {
    const { url, log } = await start(hmacAuth("B", SECRET));
    const c = client(hmacAuth("A", SECRET));
    c.setPeer("B", url);
    const sent = snapshotMsg([1, 2, 3], { holds: { epoch: 5, version: 9 }, blocks: 3 });
    const bytes = await c.send("B", sent);
    await c.send("B", { type: "goodbye" });
    expect(log.snapshots).toEqual([{ from: "A", msg: sent, wireBytes: bytes }]);
    expect(log.messages).toEqual([{ from: "A", msg: { type: "goodbye" } }]);
    // Bytes that do not decode as a snapshot: refused before the node sees them.
    const bad = Uint8Array.from([0xff]);
    const res = await fetch(`${url}/peer/snapshot`, {
      method: "POST",
      headers: signed(hmacAuth("A", SECRET), "/peer/snapshot", bad, "application/octet-stream"),
      body: bad,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/^bad snapshot: /);
    expect(log.snapshots).toHaveLength(1);
  });

  it("encodes a snapshot object once, however many peers it goes to", async () => {
    const { url, log } = await start(hmacAuth("B", SECRET));
    const atC = await start(hmacAuth("C", SECRET), "C");
    const c = client(hmacAuth("A", SECRET));
    c.setPeer("B", url);
    c.setPeer("C", atC.url);
    // Only encoding reads a snapshot's header: count each object's reads.
    const counted = () => {
      const msg = snapshotMsg([1, 2, 3], { holds: { epoch: 5, version: 9 } });
      const { header } = msg.snapshot;
      const reads = { n: 0 };
      Object.defineProperty(msg.snapshot, "header", {
        enumerable: true,
        get: () => {
          reads.n++;
          return header;
        },
      });
      return { msg, reads };
    };
    const round1 = counted();
    await c.send("B", round1.msg);
    const once = round1.reads.n;
    expect(once).toBeGreaterThan(0);
    await c.send("C", round1.msg);
    expect(round1.reads.n).toBe(once);
    // The next round's snapshot, equal but another object, is encoded afresh.
    const round2 = counted();
    await c.send("B", round2.msg);
    expect(round2.reads.n).toBe(once);
    expect(log.snapshots.map((x) => x.msg)).toEqual([round1.msg, round2.msg]);
    expect(atC.log.snapshots.map((x) => x.msg)).toEqual([round1.msg]);
  });

  it("carries all five snapshot headers, and leaves a malformed one out", async () => {
    const { url, log } = await start(hmacAuth("B", SECRET));
    const c = client(hmacAuth("A", SECRET));
    c.setPeer("B", url);
    const sent = snapshotMsg([4], {
      holds: { epoch: 1, version: 2 },
      blocks: 7,
      at: 1795976827696.25,
      echo: { t: 12.5, heldMs: 0.75 },
      served: 42,
    });
    await c.send("B", sent);
    expect(log.snapshots[0]?.msg).toEqual(sent);
    // The same snapshot again, by hand, with a holds header that is not `epoch:version`.
    const body = Buffer.from(encodeSnapshot(sent.snapshot));
    expect(log.snapshots[0]?.wireBytes).toBe(body.byteLength);
    const res = await fetch(`${url}/peer/snapshot`, {
      method: "POST",
      headers: signed(hmacAuth("A", SECRET), "/peer/snapshot", body, "application/octet-stream", {
        "x-prefixmesh-holds": "not:a:version",
        "x-prefixmesh-served": "-3",
      }),
      body,
    });
    expect(res.status).toBe(204);
    expect(log.snapshots[1]?.msg).toEqual({ type: "snapshot", snapshot: sent.snapshot });
  });

  it("refuses unauthenticated or wrongly signed snapshots with 401 before they reach the node", async () => {
    const { url, log, wire } = await start(hmacAuth("B", SECRET));
    const unsigned = await fetch(`${url}/peer/snapshot`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream", "x-prefixmesh-sender": "A" },
      body: Buffer.from([1, 2, 3]),
    });
    expect(unsigned.status).toBe(401);
    const wrong = client(hmacAuth("A", Buffer.alloc(32, 9)));
    wrong.setPeer("B", url);
    await expect(wrong.send("B", snapshotMsg([1]))).rejects.toMatchObject({ status: 401 });
    const stranger = client(hmacAuth("stranger", SECRET), {}, "http");
    stranger.setPeer("B", url);
    await expect(stranger.forward("B", fwd("s-1"), () => {})).rejects.toMatchObject({
      kind: "http",
      status: 403,
    });
    expect(wire.httpForwards).toBe(1);
    expect(log.snapshots).toHaveLength(0);
    expect(log.forwards).toHaveLength(0);
    expect(log.rejected).toEqual(["missing", "bad-signature", "unknown-peer"]);
  });

  it("answers an oversized snapshot with 413 when its body is kept in chunks (no HMAC)", async () => {
    const { url, log } = await start(insecureAuth("B"), "B", 1024);
    const c = client(insecureAuth("A"));
    c.setPeer("B", url);
    const big = snapshotMsg(Array.from({ length: 700 }, (_, i) => i + 1));
    await expect(c.send("B", big)).rejects.toMatchObject({ status: 413 });
    expect(log.snapshots).toHaveLength(0);
    await c.send("B", snapshotMsg([1, 2, 3]));
    expect(log.snapshots).toHaveLength(1);
  });

  it("answers a known path asked with the wrong method 405 with Allow, as the client port does", async () => {
    const { url } = await start(insecureAuth("B"));
    const cases: [string, string, string][] = [
      ["GET", "/peer/message", "POST"],
      ["GET", "/peer/forward", "POST"],
      ["GET", "/peer/snapshot", "POST"],
      ["PUT", "/peer/mesh", "POST"],
      ["POST", "/peer/hello?x=1", "GET, HEAD"],
    ];
    const as = { "x-prefixmesh-sender": "A" };
    for (const [method, path, allow] of cases) {
      const r = await fetch(`${url}${path}`, { method, headers: as });
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.headers.get("allow"), path).toBe(allow);
      const body = (await r.json()) as { error: string };
      expect(body.error).toContain(`allowed: ${allow}`);
    }
    const none = await fetch(`${url}/peer/nothing`, { method: "POST", headers: as });
    expect(none.status).toBe(404);
    expect(none.headers.get("allow")).toBeNull();
    // A stranger learns nothing of the routes: authentication comes first.
    expect((await fetch(`${url}/peer/message`)).status).toBe(401);
  });

  it("answers an oversized snapshot with 413", async () => {
    const { url, log } = await start(hmacAuth("B", SECRET), "B", 1024);
    const c = client(hmacAuth("A", SECRET));
    c.setPeer("B", url);
    const big = snapshotMsg(Array.from({ length: 700 }, (_, i) => i + 1));
    await expect(c.send("B", big)).rejects.toMatchObject({ status: 413 });
    expect(log.snapshots).toHaveLength(0);
  });
});

// These peers are plain HTTP servers scripted to misbehave: they exercise forwards sent as one HTTP
// request each (--forward-transport http); test/net/forward-channel.test.ts does the same for channels.
describe("peer transport failures (HTTP forwards)", () => {
  it.each(["http", "channel"] as const)(
    "classifies a refused connection as a connection failure (%s)",
    async (transport) => {
      const probe = createServer();
      await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
      const port = (probe.address() as AddressInfo).port;
      await new Promise((r) => probe.close(r));
      const c = client(insecureAuth("A"), {}, transport);
      c.setPeer("B", `http://127.0.0.1:${port}`);
      const err = await c.forward("B", fwd("A-1"), () => {}).catch((e) => e);
      expect(err).toBeInstanceOf(TransportError);
      expect((err as TransportError).kind).toBe("connection");
    },
  );

  it("surfaces a stream cut off mid-answer as an error at once, never a short answer", async () => {
    const url = await rawPeer((_req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(`${JSON.stringify({ t: "chunk", text: "partial" })}\n`);
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const c = client(insecureAuth("A"), {}, "http");
    c.setPeer("B", url);
    const chunks: string[] = [];
    const t0 = performance.now();
    const err = await c.forward("B", fwd("A-1"), (t) => chunks.push(t)).catch((e) => e);
    expect(chunks).toEqual(["partial"]);
    expect(err).toBeInstanceOf(TransportError);
    expect(["connection", "cut-off"]).toContain((err as TransportError).kind);
    // At the cut, not at the stream gap timeout (30 s): generous for a busy machine, far below that.
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  it("decodes a multi-byte character split across two network writes", async () => {
    const line = Buffer.from(`${JSON.stringify({ t: "chunk", text: "née €" })}\n`);
    const cut = line.indexOf(Buffer.from("€")) + 1; // inside the 3-byte euro sign
    const url = await rawPeer((_req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(line.subarray(0, cut));
      setTimeout(() => {
        res.write(line.subarray(cut));
        res.end(
          `${JSON.stringify({ t: "msg", msg: { type: "error", reqId: "A-1", attempt: 0, error: "x", retryable: true } })}\n`,
        );
      }, 30);
    });
    const c = client(insecureAuth("A"), {}, "http");
    c.setPeer("B", url);
    const chunks: string[] = [];
    const reply = await c.forward("B", fwd("A-1"), (t) => chunks.push(t));
    expect(chunks).toEqual(["née €"]);
    expect(reply.type).toBe("error");
  });

  it("bounds the whole forward: a peer trickling chunks forever times out", async () => {
    const url = await rawPeer((_req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      const t = setInterval(() => res.write(`${JSON.stringify({ t: "chunk", text: "." })}\n`), 20);
      res.on("close", () => clearInterval(t));
    });
    const c = client(insecureAuth("A"), { forwardTotalMs: 300 }, "http");
    c.setPeer("B", url);
    const t0 = performance.now();
    const err = await c.forward("B", fwd("A-1"), () => {}).catch((e) => e);
    expect((err as TransportError).kind).toBe("timeout");
    // The trickle never ends: any bound shows the total timeout; generous for a busy machine.
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  it("times out a silent peer between chunks", async () => {
    const url = await rawPeer((_req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(`${JSON.stringify({ t: "chunk", text: "a" })}\n`);
      // then silence
    });
    const c = client(insecureAuth("A"), { gapMs: 200 }, "http");
    c.setPeer("B", url);
    const err = await c.forward("B", fwd("A-1"), () => {}).catch((e) => e);
    expect((err as TransportError).kind).toBe("timeout");
  });
});

const haveOpenssl = await opensslAvailable();
if (!haveOpenssl) console.log("skipped mutual-TLS transport tests: openssl not installed");
describe.skipIf(!haveOpenssl)("peer transport (mutual TLS)", () => {
  const dir = mkdtempSync(join(tmpdir(), "pm-tls-"));
  let a: TlsMaterial;
  let b: TlsMaterial;
  beforeAll(async () => {
    await initCa(dir, { clusterId: "c1" });
    await issueNodeCert(dir, "A");
    await issueNodeCert(dir, "B");
    [a, b] = await Promise.all([loadTlsMaterial(dir, "A"), loadTlsMaterial(dir, "B")]);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("takes a later peer that still speaks our protocol; refuses a protocol 2 one, saying why", async () => {
    expect(await judgeHello(mtlsAuth(b), mtlsAuth(a), laterDouble)).toMatchObject({ ok: true });
    expect(await judgeHello(mtlsAuth(b), mtlsAuth(a), protocol2Double)).toEqual({
      ok: false,
      reason: "wrong-protocol",
      message:
        "peer 'B' speaks protocols 2..2, this node accepts 3..3 (below 3, one version number covered several wire forms): upgrade the peer",
    });
  });

  it("authenticates peers by certificate and refuses a pinned id mismatch", async () => {
    const { url, log, wire } = await start(mtlsAuth(b));
    expect(url.startsWith("https://")).toBe(true);
    const c = client(mtlsAuth(a), {}, "http");
    c.setPeer("B", url);
    const reply = await c.forward("B", fwd("A-1"), () => {});
    expect(reply.type).toBe("result");
    expect(wire.httpForwards).toBe(1);
    expect(log.forwards.map((f) => f.reqId)).toEqual(["A-1"]);
    await c.send("B", snapshotMsg([7]));
    expect(log.snapshots[0]?.from).toBe("A");
    // Pinned to the wrong id: the client refuses B's certificate.
    const pinned = client(mtlsAuth(a));
    pinned.setPeer("C", url);
    const err = await pinned.send("C", snapshotMsg([7])).catch((e) => e);
    expect(err).toBeInstanceOf(TransportError);
    // No client certificate at all: refused at the handshake.
    const plain = await fetch(`${url}/peer/hello`).catch((e) => e);
    expect(plain).toBeInstanceOf(Error);
    expect(log.snapshots).toHaveLength(1);
  });
});

describe("which hellos a node takes (insecure, shared secret; mutual TLS above)", () => {
  it("takes a later peer that still speaks our protocol, without --insecure's or the secret's help", async () => {
    expect(await judgeHello(insecureAuth("B"), insecureAuth("A"), laterDouble)).toMatchObject({ ok: true });
    expect(await judgeHello(hmacAuth("B", SECRET), hmacAuth("A", SECRET), laterDouble)).toMatchObject({
      ok: true,
    });
  });

  it("refuses a protocol 2 peer, in shared-secret mode for the response MACs it lacks", async () => {
    expect(await judgeHello(insecureAuth("B"), insecureAuth("A"), protocol2Double)).toMatchObject({
      ok: false,
      reason: "wrong-protocol",
      message: expect.stringMatching(
        /^peer 'B' speaks protocols 2\.\.2, this node accepts 3\.\.3 \(below 3, .*\): upgrade the peer$/,
      ),
    });
    // Sealed, as a real protocol 2 node's hello is not (response-auth.test.ts): it reaches the check.
    expect(await judgeHello(hmacAuth("B", SECRET), hmacAuth("A", SECRET), protocol2Double)).toEqual({
      ok: false,
      reason: "wrong-protocol",
      message:
        "peer 'B' speaks protocols 2..2, this node accepts 3..3 (a shared-secret mesh needs 3 or newer: older nodes' answers carry no response MAC): upgrade the peer",
    });
  });

  it("refuses a later peer that no longer speaks our protocol: this node is the one to upgrade", async () => {
    const newer = () => ({ id: "B", cluster: "c1", model: "m", protocol: 4 });
    const r = await judgeHello(insecureAuth("B"), insecureAuth("A"), newer);
    expect(r).toMatchObject({ ok: false, reason: "wrong-protocol" });
    expect(r.ok || r.message).toBe(
      "peer 'B' speaks protocols 4..4, this node accepts 3..3: this node is too old for the peer, upgrade it",
    );
  });
});

describe("snapshot clock headers", () => {
  it("round-trips the echo and rejects malformed or oversized values", async () => {
    const { formatClock, formatEcho, parseEcho, parseClock } = await import("../../src/net/snapshot-wire.js");
    const echo = { t: 1795976827696.25, heldMs: 3.5 };
    expect(parseEcho(formatEcho(echo))).toEqual(echo);
    // Real clock readings have long fractions (performance.now) and may be tiny (exponent notation).
    const held = 0.1234567890123;
    expect(parseEcho(formatEcho({ t: 1795976827696.2534, heldMs: held }))?.heldMs).toBeCloseTo(held, 3);
    expect(parseClock(formatClock(1e-7))).toBe(0);
    expect(parseClock("12.5")).toBe(12.5);
    for (const bad of ["", "-1", "1e9", "NaN", "1:2", "x", "9".repeat(40)])
      expect(parseClock(bad)).toBeUndefined();
    for (const bad of ["1", "1:2:3", "a:b", "-1:2", `${"9".repeat(30)}:1`])
      expect(parseEcho(bad)).toBeUndefined();
    expect(parseEcho(["1:2"])).toBeUndefined();
  });
});

describe("a peer that needs the prompt text its hello said it did not", () => {
  it.each(["channel", "http"] as const)(
    "gets the forward again with the text at once, and from then on (%s), acked exactly once",
    async (transport) => {
      const seen: (string | undefined)[] = [];
      // The peer's engine now needs the text: a forward without it is refused before its node sees it.
      const onForward: PeerServerHandlers["onForward"] = (_from, msg, reply) => {
        seen.push(msg.request.prompt);
        if (msg.request.prompt === undefined) {
          reply.finish({
            type: "error",
            reqId: msg.reqId,
            attempt: msg.attempt,
            error: PROMPT_TEXT_NEEDED,
            retryable: true,
          });
          return;
        }
        reply.ack();
        // Answered after the deferred ack has left: the re-send's ack must reach the origin.
        setTimeout(() => reply.finish(resultFor(msg, "ok")), 40);
      };
      const { url } = await start(hmacAuth("B", SECRET), "B", undefined, onForward);
      const c = client(hmacAuth("A", SECRET), {}, transport);
      c.setPeer("B", url);
      c.setPromptText("B", false); // what its hello said
      let acks = 0;
      const reply = await c.forward(
        "B",
        fwd("A-1"),
        () => {},
        () => acks++,
      );
      expect(reply).toMatchObject({ type: "result", reqId: "A-1" });
      expect(seen).toEqual([undefined, "abcd"]);
      // Acked once: over HTTP the refused copy's response headers ack and the re-send's is not passed
      // on; over the channel the refusal carries no ack and the re-send's deferred ack does.
      expect(acks).toBe(1);
      expect(c.sendsPromptText("B")).toBe(true);
      await c.forward("B", fwd("A-2"), () => {});
      expect(seen).toEqual([undefined, "abcd", "abcd"]);
    },
  );
});

describe("a forward's sampling fields", () => {
  it.each(["channel", "http"] as const)(
    "reach the peer's node as sent (%s), penalties included",
    async (transport) => {
      const seen: unknown[] = [];
      const onForward: PeerServerHandlers["onForward"] = (_from, msg, reply) => {
        seen.push(msg.request);
        reply.ack();
        reply.finish(resultFor(msg, "ok"));
      };
      const { url } = await start(hmacAuth("B", SECRET), "B", undefined, onForward);
      const c = client(hmacAuth("A", SECRET), {}, transport);
      c.setPeer("B", url);
      const base = fwd("A-1");
      const sampled = { temperature: 0, topP: 0.9, seed: 7, presencePenalty: 1.5, frequencyPenalty: -0.5 };
      await c.forward("B", { ...base, request: { ...base.request, ...sampled } }, () => {});
      expect(seen[0]).toMatchObject(sampled);
    },
  );
});

describe("a forward's ack says the acking node's epoch", () => {
  const EPOCH = 1_733_380_000_123;
  it.each(["channel", "http"] as const)(
    "reaches the origin with the ack, before the answer (%s); an ack without one says none",
    async (transport) => {
      const events: string[] = [];
      let acked!: () => void;
      const ackSeen = new Promise<void>((r) => {
        acked = r;
      });
      const onForward: PeerServerHandlers["onForward"] = (_from, msg, reply) => {
        reply.ack(msg.reqId === "A-old" ? undefined : EPOCH);
        // The answer waits for the origin to see the ack (a generous fallback keeps a broken ack
        // from hanging the test: the order check below then fails).
        const fallback = new Promise((r) => setTimeout(() => r("fallback"), 5_000));
        void Promise.race([ackSeen, fallback]).then((why) => {
          if (why === "fallback") events.push("ack not seen");
          reply.finish(resultFor(msg, "ok"));
        });
      };
      const { url } = await start(hmacAuth("B", SECRET), "B", undefined, onForward);
      const c = client(hmacAuth("A", SECRET), {}, transport);
      c.setPeer("B", url);
      const said: (number | undefined)[] = [];
      const onAck = (epoch?: number) => {
        events.push("ack");
        said.push(epoch);
        acked();
      };
      await c.forward("B", fwd("A-1"), () => {}, onAck).then(() => events.push("answer"));
      expect(events).toEqual(["ack", "answer"]);
      await c.forward("B", fwd("A-old"), () => {}, onAck);
      expect(said).toEqual([EPOCH, undefined]);
    },
  );
});
