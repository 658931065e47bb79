/**
 * The 101-MAC tests' harness (shared-secret mode, all on 127.0.0.1): a real peer server B, a forger
 * on the path answering the upgrade itself, clients, and the refusals the origin gives.
 */
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterEach, expect } from "vitest";
import { type WebSocket, WebSocketServer } from "ws";
import { answerRecord } from "../../src/net/answer-wire.js";
import {
  type ChannelBinding,
  channelAcceptTag,
  frameMac,
  HEADER_CHANNEL_MAC,
} from "../../src/net/auth/channel-mac.js";
import { HEADER_NONCE, HEADER_SENDER, HEADER_SIGNATURE } from "../../src/net/auth/hmac.js";
import { encodeRecords } from "../../src/net/channel-server.js";
import { decodeForwardFrame } from "../../src/net/forward-frame.js";
import { hmacAuth, type PeerAuth } from "../../src/net/transport-auth.js";
import { CHANNEL_ACCEPT_REFUSED, PeerClient, TransportError } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import { CHANNEL_PATH, PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { fwd, resultFor, SECRET } from "./fixtures.js";

export const REFUSED_MISSING = {
  kind: "protocol",
  unauthenticated: true,
  authRefusal: CHANNEL_ACCEPT_REFUSED,
  message: expect.stringMatching(/^peer B: forward channel refused: its 101 answer carries no channel MAC/),
};
export const REFUSED_WRONG = {
  kind: "protocol",
  unauthenticated: true,
  authRefusal: CHANNEL_ACCEPT_REFUSED,
  message: expect.stringMatching(/^peer B: forward channel refused: its 101 answer fails its channel MAC/),
};

/** The tag B would send, with `edit` applied to what it binds. */
export const tagAs =
  (edit: (b: ChannelBinding) => ChannelBinding = (b) => b) =>
  (req: IncomingMessage, accept: string) =>
    channelAcceptTag(
      SECRET,
      edit({
        nonce: String(req.headers[HEADER_NONCE]),
        client: String(req.headers[HEADER_SENDER]),
        server: "B",
      }),
      { accept, extensions: "", protocol: "", signature: String(req.headers[HEADER_SIGNATURE]) },
    );

/**
 * Peers, forgers and clients closed after each test, and why a forward failed. Call it at a test
 * file's top level: it registers that file's afterEach.
 */
export function channelHarness() {
  const closers: (() => unknown)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  /** A real peer server "B" whose fake node answers each forward with its reqId. */
  async function realPeer(auth: PeerAuth) {
    const forwards: string[] = [];
    const hellos = { n: 0 };
    const server: FastifyInstance = buildPeerServer({
      auth,
      handlers: {
        // As admin.ts says it: a build that seals its 101 says so, an older one says nothing.
        hello: () => {
          hellos.n++;
          return {
            id: "B",
            cluster: "c1",
            model: "m",
            protocol: PROTOCOL_VERSION,
            ...(auth.sealChannelAccept ? { channelAcceptMac: true } : {}),
          };
        },
        isKnownPeer: () => true,
        onMessage() {},
        onForward: (_from, msg, reply) => {
          forwards.push(msg.reqId);
          reply.finish(resultFor(msg, msg.reqId));
        },
      },
    });
    closers.push(() => server.close());
    return { url: await server.listen({ host: "127.0.0.1", port: 0 }), forwards, hellos };
  }

  function client(auth: PeerAuth = hmacAuth("A", SECRET)) {
    const c = new PeerClient({ auth, timeouts: { connectMs: 2_000, firstByteMs: 5_000 } });
    closers.push(() => c.close());
    return c;
  }

  /** Why a forward failed: the TransportError's fields the runtime acts on. */
  async function failure(c: PeerClient, reqId: string) {
    const err = await c
      .forward("B", fwd(reqId), () => {})
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(TransportError);
    const e = err as TransportError;
    return {
      kind: e.kind,
      unauthenticated: e.unauthenticated,
      authRefusal: e.authRefusal,
      message: e.message,
    };
  }

  /**
   * A forger on the path that answers the upgrade itself with a tag made by `tagFor` (undefined: none),
   * and, if its 101 is taken, answers forwards with frames sealed as B would (so a taken 101 shows).
   */
  async function forger(tagFor: (req: IncomingMessage, accept: string) => string | undefined) {
    const http = createServer((_req, res) => res.writeHead(404).end());
    const wss = new WebSocketServer({ server: http, path: CHANNEL_PATH, perMessageDeflate: false });
    const nonces = new WeakMap<IncomingMessage, string>();
    wss.on("headers", (lines: string[], req: IncomingMessage) => {
      nonces.set(req, String(req.headers[HEADER_NONCE]));
      const accept = lines.find((l) => l.startsWith("Sec-WebSocket-Accept: "))?.slice(22) ?? "";
      const tag = tagFor(req, accept);
      if (tag !== undefined) lines.push(`${HEADER_CHANNEL_MAC}: ${tag}`);
    });
    const taken: string[] = [];
    wss.on("connection", (ws: WebSocket, req: IncomingMessage) => {
      const client = String(req.headers[HEADER_SENDER]);
      const mac = frameMac(SECRET, { nonce: nonces.get(req) ?? "", client, server: "B" }, "server");
      ws.on("message", (data: Buffer) => {
        const payload = mac.open(data);
        const f = payload && decodeForwardFrame(payload);
        if (!f?.ok || !f.msg) return;
        taken.push(f.msg.reqId);
        ws.send(mac.seal(encodeRecords([answerRecord.final(f.k, resultFor(f.msg, "forged"))])));
      });
    });
    await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
    closers.push(() => {
      for (const ws of wss.clients) ws.terminate();
      wss.close();
      http.close();
    });
    return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, taken };
  }

  return { closers, realPeer, client, failure, forger };
}
