import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { frameMac } from "../../src/net/auth/channel-mac.js";
import { MAX_CHANNELS_PER_PEER } from "../../src/net/channel-server.js";
import { decodeForwardFrame } from "../../src/net/forward-frame.js";
import type { PeerServerHandlers } from "../../src/net/peer-handlers.js";
import { hmacAuth, insecureAuth, type PeerAuth } from "../../src/net/transport-auth.js";
import { PeerClient, type TransportError } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import { CHANNEL_PATH, PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { waitFor } from "../e2e/helpers.js";
import { fwd, resultFor, SECRET } from "./fixtures.js";

const servers: FastifyInstance[] = [];
const clients: PeerClient[] = [];
const raws: { close(): void }[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
  for (const r of raws.splice(0)) r.close();
});

/** A real peer server whose fake node answers each forward with its reqId, chunk by chunk, after `delayMs`. */
async function peer(auth: PeerAuth, onForward?: PeerServerHandlers["onForward"]) {
  const log = { httpForwards: 0, forwards: [] as string[], rejected: [] as string[] };
  const handlers: PeerServerHandlers = {
    hello: () => ({ id: "B", cluster: "c1", model: "m", protocol: PROTOCOL_VERSION }),
    isKnownPeer: (id) => id !== "stranger",
    onMessage() {},
    onForward:
      onForward ??
      ((_from, msg, reply) => {
        log.forwards.push(msg.reqId);
        setTimeout(
          () => {
            for (const ch of msg.reqId) reply.chunk(ch);
            reply.finish(resultFor(msg, msg.reqId));
          },
          msg.request.maxTokens, // the test's way to vary how long each answer takes
        );
      }),
    onAuthRejected: (r) => log.rejected.push(r),
  };
  const server = buildPeerServer({ auth, handlers });
  server.addHook("onRequest", (req, _reply, done) => {
    if (req.url === "/peer/forward") log.httpForwards++;
    done();
  });
  servers.push(server);
  const url = await server.listen({ host: "127.0.0.1", port: 0 });
  return { url, log, server };
}

function client(auth: PeerAuth, timeouts = {}) {
  const c = new PeerClient({ auth, timeouts });
  clients.push(c);
  return c;
}

/** A scripted WebSocket peer (insecure mode: frames are plain JSON) for misbehaviour the real server never shows. */
async function scriptedPeer(onFrame: (ws: WebSocket, frame: { k: number }) => void) {
  const http: Server = createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ server: http, path: CHANNEL_PATH });
  // Forward frames, or a 16-byte tag then one from a shared-secret client (the tag is not checked here).
  const parse = (d: Buffer) => {
    for (const b of [d, d.subarray(16)]) {
      const f = decodeForwardFrame(b);
      if (f.ok) return { k: f.k };
    }
    return { k: -1 };
  };
  wss.on("connection", (ws) => ws.on("message", (d: Buffer) => onFrame(ws, parse(d))));
  await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
  raws.push({
    close: () => {
      for (const c of wss.clients) c.terminate();
      wss.close();
      http.close();
    },
  });
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
}

describe("forward channel", () => {
  it("carries forwards on one WebSocket, not an HTTP request each, and streams answers in order", async () => {
    const { url, log } = await peer(hmacAuth("B", SECRET));
    const c = client(hmacAuth("A", SECRET));
    c.setPeer("B", url);
    const chunks: string[] = [];
    const reply = await c.forward("B", fwd("A-1"), (t) => chunks.push(t));
    expect(chunks.join("")).toBe("A-1");
    expect(reply).toMatchObject({ type: "result", reqId: "A-1", result: { text: "A-1", promptTokens: 4 } });
    expect(log.httpForwards).toBe(0);
    expect(log.forwards).toEqual(["A-1"]);
  });

  it("multiplexes concurrent forwards: answers finishing out of order reach their own callers", async () => {
    const { url, log } = await peer(hmacAuth("B", SECRET));
    const c = client(hmacAuth("A", SECRET));
    c.setPeer("B", url);
    const ids = Array.from({ length: 24 }, (_, i) => `A-${i}`);
    const got = await Promise.all(
      ids.map(async (id, i) => {
        const chunks: string[] = [];
        // Later requests answer sooner: completion order is the reverse of sending order.
        const r = await c.forward("B", fwd(id, 60 - 2 * i), (t) => chunks.push(t));
        return { id, text: r.type === "result" ? r.result.text : "", chunks: chunks.join("") };
      }),
    );
    for (const g of got) expect(g).toEqual({ id: g.id, text: g.id, chunks: g.id });
    expect(log.httpForwards).toBe(0);
  });

  it("refuses a wrongly signed channel (401) or a stranger (403) before any forward reaches the node", async () => {
    const { url, log } = await peer(hmacAuth("B", SECRET));
    const wrong = client(hmacAuth("A", Buffer.alloc(32, 9)));
    wrong.setPeer("B", url);
    await expect(wrong.forward("B", fwd("w-1"), () => {})).rejects.toMatchObject({
      kind: "http",
      status: 401,
    });
    const stranger = client(hmacAuth("stranger", SECRET));
    stranger.setPeer("B", url);
    await expect(stranger.forward("B", fwd("s-1"), () => {})).rejects.toMatchObject({
      kind: "http",
      status: 403,
    });
    expect(log.forwards).toEqual([]);
    expect(log.rejected).toEqual(["bad-signature", "unknown-peer"]);
  });

  it("answers a malformed forward with a refusal on its stream and keeps the channel for the next", async () => {
    const { url, log } = await peer(insecureAuth("B"));
    const c = client(insecureAuth("A"));
    c.setPeer("B", url);
    const bad = fwd("A-1");
    bad.hops = 1000; // beyond the wire's bound
    await expect(c.forward("B", bad, () => {})).rejects.toMatchObject({ kind: "http", status: 400 });
    await expect(c.forward("B", fwd("A-2"), () => {})).resolves.toMatchObject({ reqId: "A-2" });
    expect(log.forwards).toEqual(["A-2"]);
  });

  it("fails every open stream at once when the peer goes away mid-answer, then reconnects", async () => {
    let held: (() => void) | undefined;
    const { url, server } = await peer(insecureAuth("B"), (_from, msg, reply) => {
      reply.chunk("partial");
      held = () => reply.finish(resultFor(msg, "late"));
    });
    const c = client(insecureAuth("A"));
    c.setPeer("B", url);
    const chunks: string[] = [];
    const pending = c.forward("B", fwd("A-1"), (t) => chunks.push(t)).catch((e) => e);
    // The stream is open mid-answer once its first chunk is here.
    await waitFor(() => chunks.length > 0, 10_000, "the first chunk of the held answer");
    const t0 = performance.now();
    await server.close(); // closes its channels (1001): the open stream is cut off
    const err = (await pending) as TransportError;
    expect(chunks).toEqual(["partial"]);
    expect(["cut-off", "connection"]).toContain(err.kind);
    // At the close, not at the stream gap timeout (30 s): generous for a busy machine, far below that.
    expect(performance.now() - t0).toBeLessThan(10_000);
    held?.(); // an answer after the channel closed goes nowhere and breaks nothing
  });

  it("times out a silent peer: no first frame, a gap between frames, a forward that never ends", async () => {
    const silentUrl = await scriptedPeer(() => {});
    const gapUrl = await scriptedPeer((ws, f) =>
      ws.send(JSON.stringify([{ t: "chunk", k: f.k, text: "a" }])),
    );
    const trickleUrl = await scriptedPeer((ws, f) => {
      const t = setInterval(() => ws.send(JSON.stringify([{ t: "chunk", k: f.k, text: "." }])), 20);
      ws.on("close", () => clearInterval(t));
    });
    const cases = [
      [silentUrl, { firstByteMs: 150 }],
      [gapUrl, { gapMs: 150 }],
      [trickleUrl, { forwardTotalMs: 250 }],
    ] as const;
    for (const [url, timeouts] of cases) {
      const c = client(insecureAuth("A"), timeouts);
      c.setPeer("B", url);
      const t0 = performance.now();
      const err = (await c.forward("B", fwd("A-1"), () => {}).catch((e) => e)) as TransportError;
      expect(err.kind).toBe("timeout");
      // At the close, not at the stream gap timeout (30 s): generous for a busy machine, far below that.
      expect(performance.now() - t0).toBeLessThan(10_000);
    }
  });

  it("waits for a forward as long as its origin does (deadlineMs), past the configured timeouts", async () => {
    const { url } = await peer(insecureAuth("B"));
    const short = { firstByteMs: 150, gapMs: 150, forwardTotalMs: 250 };
    for (const forwardTransport of ["channel", "http"] as const) {
      const c = new PeerClient({ auth: insecureAuth("A"), timeouts: short, forwardTransport });
      clients.push(c);
      c.setPeer("B", url);
      // The fake node answers after maxTokens ms: 600 ms, past every configured bound.
      const cut = (await c.forward("B", fwd("A-1", 600), () => {}).catch((e) => e)) as TransportError;
      expect(cut.kind).toBe("timeout");
      const waited = await c.forward("B", { ...fwd("A-2", 600), deadlineMs: 2_000 }, () => {});
      expect(waited).toMatchObject({ type: "result", reqId: "A-2" });
    }
  });

  it("closes a channel that sends something other than a bounded forward frame", async () => {
    const { url, log } = await peer(insecureAuth("B"));
    const closeCode = async (frame: Buffer) => {
      const ws = new WebSocket(`${url.replace("http", "ws")}${CHANNEL_PATH}`, {
        headers: { "x-prefixmesh-sender": "A" },
      });
      await new Promise((r) => ws.once("open", r));
      ws.send(frame);
      return new Promise<number>((r) => ws.once("close", (code) => r(code)));
    };
    expect(await closeCode(Buffer.from("garbage"))).toBe(1008);
    const header = Buffer.from(JSON.stringify({ t: "nope", k: 1 }));
    const len = Buffer.alloc(4);
    len.writeUInt32BE(header.length);
    expect(await closeCode(Buffer.concat([len, header]))).toBe(1008);
    // Larger than any forward the server admits (16 MiB by default): refused by size, unread.
    expect(await closeCode(Buffer.alloc(17 * 1024 * 1024))).toBe(1009);
    expect(log.forwards).toEqual([]);
  });

  it("holds at most MAX_CHANNELS_PER_PEER channels per peer: the next upgrade gets 429", async () => {
    const { url } = await peer(insecureAuth("B"));
    const open = (sender: string) =>
      new Promise<{ ws: WebSocket; status: number }>((resolve) => {
        const ws = new WebSocket(`${url.replace("http", "ws")}${CHANNEL_PATH}`, {
          headers: { "x-prefixmesh-sender": sender },
        });
        ws.once("open", () => resolve({ ws, status: 101 }));
        ws.once("unexpected-response", (_req, res) => {
          res.resume();
          resolve({ ws, status: res.statusCode ?? 0 });
        });
        ws.on("error", () => {});
      });
    const held = await Promise.all(Array.from({ length: MAX_CHANNELS_PER_PEER }, () => open("A")));
    expect(held.map((h) => h.status)).toEqual(held.map(() => 101));
    expect((await open("A")).status).toBe(429);
    // Another peer is not held back by A's channels; a closed channel frees its place.
    const c = await open("C");
    expect(c.status).toBe(101);
    const first = held[0] as { ws: WebSocket };
    await new Promise((r) => {
      first.ws.once("close", r);
      first.ws.close();
    });
    // The server sees the close a moment after the client does.
    let again: Awaited<ReturnType<typeof open>> | undefined;
    await waitFor(
      async () => {
        again = await open("A");
        return again.status === 101;
      },
      10_000,
      "a freed place for A's channel",
    );
    if (again) held.push(again);
    for (const h of [...held, c]) h.ws.terminate();
  });

  it("treats garbage from the peer as a protocol error, never as an answer", async () => {
    const url = await scriptedPeer((ws) => ws.send("{not json"));
    const c = client(insecureAuth("A"));
    c.setPeer("B", url);
    await expect(c.forward("B", fwd("A-1"), () => {})).rejects.toMatchObject({ kind: "protocol" });
  });

  it("falls back to one HTTP request per forward for a peer without a channel endpoint", async () => {
    // An older peer: GET /peer/channel is a 404; POST /peer/forward streams NDJSON.
    const hits = { channel: 0, forward: 0 };
    const http = createServer((req, res) => {
      const path = req.url?.split("?")[0];
      if (path === CHANNEL_PATH) hits.channel++;
      if (path === "/peer/forward") hits.forward++;
      if (req.url !== "/peer/forward") return void res.writeHead(404).end();
      req.resume();
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end(
        `${JSON.stringify({ t: "msg", msg: { type: "error", reqId: "A-1", attempt: 0, error: "x", retryable: true } })}\n`,
      );
    });
    await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
    raws.push({ close: () => http.close() });
    const c = client(insecureAuth("A"));
    c.setPeer("B", `http://127.0.0.1:${(http.address() as AddressInfo).port}`);
    await expect(c.forward("B", fwd("A-1"), () => {})).resolves.toMatchObject({
      type: "error",
      reqId: "A-1",
    });
    await expect(c.forward("B", fwd("A-1"), () => {})).resolves.toMatchObject({ type: "error" });
    // The channel was tried once; the second forward went straight to HTTP.
    expect(hits).toEqual({ channel: 1, forward: 2 });
  });
});

describe("forward channel frame integrity (shared-secret mode)", () => {
  it("opens what the other side sealed, in order, and nothing else", () => {
    const binding = { nonce: "nonce-1234567890abcdef", client: "A", server: "B" };
    const a = frameMac(SECRET, binding, "client");
    const b = frameMac(SECRET, binding, "server");
    const f1 = a.seal(Buffer.from("one"));
    const f2 = a.seal(Buffer.from("two"));
    // Reordered: the second frame is refused where the first is expected.
    expect(b.open(f2)).toBeUndefined();
    expect(b.open(f1)?.toString()).toBe("one");
    // Replayed: the first frame again is refused.
    expect(b.open(f1)).toBeUndefined();
    expect(b.open(f2)?.toString()).toBe("two");
    // Altered, truncated, reflected back, or from another channel's nonce: refused.
    const f3 = a.seal(Buffer.from("three"));
    const altered = Buffer.from(f3);
    altered.writeUInt8(altered.readUInt8(altered.length - 1) ^ 1, altered.length - 1);
    expect(b.open(altered)).toBeUndefined();
    expect(b.open(f3.subarray(0, 10))).toBeUndefined();
    expect(a.open(b.seal(Buffer.from("x")))?.toString()).toBe("x");
    const other = frameMac(SECRET, { ...binding, nonce: "nonce-ffffffffffffffff" }, "server");
    expect(other.open(a.seal(Buffer.from("y")))).toBeUndefined();
    // The same nonce between other nodes (a channel to C, or opened by C) has other keys.
    expect(
      frameMac(SECRET, { ...binding, server: "C" }, "server").open(a.seal(Buffer.from("w"))),
    ).toBeUndefined();
    expect(
      frameMac(SECRET, { ...binding, client: "C" }, "server").open(a.seal(Buffer.from("v"))),
    ).toBeUndefined();
    expect(frameMac(SECRET, binding, "client").open(a.seal(Buffer.from("z")))).toBeUndefined();
    expect(b.open(f3)?.toString()).toBe("three");
  });

  it("closes a channel whose frames are not sealed with the secret", async () => {
    // A scripted peer that accepts the upgrade (it does not check) but cannot seal its answers.
    const url = await scriptedPeer((ws, f) =>
      ws.send(JSON.stringify([{ t: "msg", k: f.k, msg: resultFor(fwd("A-1"), "forged") }])),
    );
    const c = client(hmacAuth("A", SECRET));
    c.setPeer("B", url);
    await expect(c.forward("B", fwd("A-1"), () => {})).rejects.toMatchObject({ kind: "protocol" });
  });
});
