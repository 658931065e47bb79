/**
 * The peer server: a separate port (HTTP/1.1 keep-alive, TLS in mTLS mode) that peers use for
 * anti-entropy snapshots, forwarded requests and small messages. Every request is authenticated before
 * anything reaches the node; bodies are size-bounded (413) and validated (400).
 */
import { METHODS } from "node:http";
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { streamLine } from "./answer-wire.js";
import { HEADER_CHALLENGE, HEADER_PROOF } from "./auth/hmac.js";
import { HEADER_RESPONSE_MAC } from "./auth/response-mac.js";
import { bodyChunksParser, isBodyChunks } from "./body-chunks.js";
import { attachForwardChannel, MAX_CHANNELS_PER_PEER } from "./channel-server.js";
import { refuseConnect } from "./connect-method.js";
import { type ConnectionLimits, limitConnections, type RefusalReason } from "./connection-limit.js";
import {
  applyConnectionTimeouts,
  type ConnectionTimeouts,
  type TimeoutReason,
  tlsHandshakeTimeout,
} from "./connection-timeouts.js";
import { EPOCH_HEADER, parseForward } from "./forward-wire.js";
import { frameworkAnswerOptions, REQUIRE_NO_HOST, refuseBeforeRoutes } from "./framework-answers.js";
import { messageFromWire } from "./lone-wire.js";
import { MESH_PATH } from "./mesh-wire.js";
import type { PeerServerHandlers } from "./peer-handlers.js";
import { replyStream } from "./reply-stream.js";
import { trackRouteMethods } from "./route-methods.js";
import { SnapshotDecoder } from "./snapshot-decoder.js";
import { snapshotMsgFromWire } from "./snapshot-wire.js";
import { admitPeer, type PeerAuth } from "./transport-auth.js";
import { PEER_POOL_CONNECTIONS } from "./transport-client.js";
import { FORWARD_PATH, HELLO_PATH, MESSAGE_PATH, SNAPSHOT_PATH } from "./transport-wire.js";

export interface PeerServerOptions {
  auth: PeerAuth;
  handlers: PeerServerHandlers;
  maxSnapshotBytes?: number;
  maxForwardBytes?: number;
  /** Delay injection (the paper's Δcomm) on the answer direction of forwards. */
  delay?: () => Promise<void>;
  logger?: import("fastify").FastifyBaseLogger;
  /** Bounds on the port's connections (defaults: PEER_CONNECTION_DEFAULTS). */
  connections?: Partial<PeerConnectionBounds>;
  /** A connection refused as it opened, or closed for being idle or slow. */
  onConnectionClosed?: (reason: RefusalReason | TimeoutReason) => void;
  /** Decodes snapshot frames (default: a `SnapshotDecoder`, large frames off the event loop). */
  snapshotDecoder?: SnapshotDecoder;
}

export interface PeerConnectionBounds {
  /**
   * `perAddress` counts connections that have not yet carried a member's authenticated request: a
   * member's own count only against `max`, so peers behind one NAT address are not held to it.
   */
  limits: ConnectionLimits;
  /** Keep-alive is the peer port's own (PEER_KEEP_ALIVE_MS): it must outlast the peers' pools. */
  timeouts: Omit<ConnectionTimeouts, "keepAliveMs">;
}

/** What one peer may hold open here: its client pool and its most forward channels. */
export const PEER_CONNECTIONS_PER_PEER = PEER_POOL_CONNECTIONS + MAX_CHANNELS_PER_PEER;
/** Besides the members' own: DNS probes, reconnects in flight, strangers refused by authentication. */
const PEER_CONNECTIONS_SPARE = 64;

/** The peer port's total for `maxPeers` members: generous for them, finite for anyone else. */
export function peerPortConnectionLimit(maxPeers: number): number {
  return PEER_CONNECTIONS_PER_PEER * maxPeers + PEER_CONNECTIONS_SPARE;
}

/** Longer than the peers' pools keep an idle connection (30 s), so a pool never reuses a closing one. */
export const PEER_KEEP_ALIVE_MS = 65_000;

export const PEER_CONNECTION_DEFAULTS: PeerConnectionBounds = {
  limits: { max: peerPortConnectionLimit(256), perAddress: 64 },
  timeouts: { idleMs: 10_000, headersMs: 20_000, requestMs: 120_000 },
};

declare module "fastify" {
  interface FastifyRequest {
    peerId?: string;
  }
}

/** The peer port's error shape, for every refusal it makes. */
const peerErrorBody = (error: string) => ({ error });
const BODY_METHOD = { hasBody: true, overrideExisting: true };

const DEFAULT_MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024;
const DEFAULT_MAX_FORWARD_BYTES = 16 * 1024 * 1024;
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export function buildPeerServer(opts: PeerServerOptions): FastifyInstance {
  const { auth, handlers } = opts;
  const tls = auth.serverTls();
  const bounds = { ...PEER_CONNECTION_DEFAULTS, ...opts.connections };
  const timeouts = { ...bounds.timeouts, keepAliveMs: PEER_KEEP_ALIVE_MS };
  const app = Fastify({
    ...(tls ? { https: { ...tls, ...tlsHandshakeTimeout(timeouts), ...REQUIRE_NO_HOST } } : {}),
    // Our own pino logger logs what matters; per-request access logs would dominate the router overhead.
    logger: false,
    keepAliveTimeout: PEER_KEEP_ALIVE_MS,
    bodyLimit: MAX_MESSAGE_BYTES,
    ...frameworkAnswerOptions(peerErrorBody),
  }) as unknown as FastifyInstance;
  // A signature covers the body, so every method's body is read (fastify skips GET's, HEAD's,
  // TRACE's and those of methods it does not know): else a signed request with a body and such a
  // method fails its check (401) where it should learn that no route takes it (404 or 405).
  for (const method of METHODS) if (method !== "CONNECT") app.addHttpMethod(method, BODY_METHOD);
  refuseBeforeRoutes(app, peerErrorBody);

  refuseConnect(app.server as import("node:http").Server, peerErrorBody);
  // Small NDJSON records must leave at once, not wait for Nagle to coalesce them.
  app.server.on("connection", (socket: import("node:net").Socket) => socket.setNoDelay(true));
  const watchIdle = applyConnectionTimeouts(app.server, timeouts, opts.onConnectionClosed);
  const limiter = limitConnections(app.server, bounds.limits, {
    tls: tls !== undefined,
    onAdmitted: watchIdle,
    ...(opts.onConnectionClosed ? { onRefused: opts.onConnectionClosed } : {}),
  });

  // Raw bytes for every body: the HMAC covers the exact bytes, and JSON is parsed only after auth.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_req, body, done) => done(null, body));

  app.setErrorHandler((err: Error & { statusCode?: number }, _req, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) opts.logger?.error({ err }, "peer server error");
    reply.status(status).send({ error: status === 500 ? "internal error" : err.message });
  });
  // As the client port: a known path with another method is 405 with `Allow`, not "no such endpoint".
  const allowedOn = trackRouteMethods(app);
  app.setNotFoundHandler((req, reply) => {
    const allow = allowedOn(req.url);
    if (allow === undefined) return reply.status(404).send({ error: "no such peer endpoint" });
    const path = req.url.split("?")[0];
    const error = `${req.method} is not allowed on ${path}; allowed: ${allow}`;
    return reply.status(405).header("allow", allow).send({ error });
  });

  // Callback style (not async): no promise and microtask hop per peer request. It runs for the
  // not-found handler too, so an unauthenticated request is refused (401) before any route is looked
  // at: a stranger learns neither which paths nor which methods this port serves.
  app.addHook("preHandler", (req, reply, done) => {
    const r = admitPeer(
      auth,
      handlers,
      {
        method: req.method,
        path: req.url,
        headers: req.headers,
        body: req.body instanceof Buffer ? req.body : digestOf(req.body),
        socket: req.raw.socket,
      },
      // Hello is how an authenticated node that has not admitted us yet (e.g. found us by DNS) learns
      // who we are; it reveals only id, cluster, model, protocol version and whether we need prompt
      // text, so membership is not required for it. Mesh messages come from joiners too: the node
      // admits their senders only after verifying them itself. A request no route takes (404, or
      // 405 for a known path) is granted nothing, so it needs no membership: any authenticated node
      // may learn which of the two it was.
      !req.is404 && req.routeOptions.url !== HELLO_PATH && req.routeOptions.url !== MESH_PATH,
    );
    if (!r.ok) {
      reply
        .status(r.status)
        .send(r.clockMs === undefined ? { error: r.error } : { error: r.error, clockMs: r.clockMs });
      return;
    }
    // A member's (or an authenticated joiner's) connection: no longer counted against its address.
    if (!req.is404 && req.routeOptions.url !== HELLO_PATH) limiter.trust(req.raw.socket);
    req.peerId = r.sender;
    done();
  });

  // Shared-secret mode: an answer to an authenticated request carries its response MAC, bound to that
  // request (response-mac.ts); the forward's streamed answer seals its head and records itself.
  if (auth.mode === "hmac") {
    app.addHook("onSend", (req, reply, payload, done) => {
      const sealer = req.peerId !== undefined ? auth.responseSealer(req.headers) : undefined;
      if (sealer && (payload == null || typeof payload === "string" || payload instanceof Buffer)) {
        const body = payload ?? "";
        reply.header(HEADER_RESPONSE_MAC, sealer.head(reply.statusCode, reply.getHeaders(), body));
      }
      done(null, payload);
    });
  }

  // Forwards normally travel on a channel (a WebSocket upgraded on this port); POST /peer/forward
  // below serves origins configured for one HTTP request per forward.
  const maxForwardBytes = opts.maxForwardBytes ?? DEFAULT_MAX_FORWARD_BYTES;
  const channel = attachForwardChannel(app.server as import("node:http").Server, {
    auth,
    handlers,
    maxForwardBytes,
    delay: opts.delay,
    logger: opts.logger,
    onMember: (socket) => limiter.trust(socket),
  });
  // Before the server closes: upgraded sockets would otherwise keep `close()` waiting.
  app.addHook("preClose", (done) => {
    channel.close();
    done();
  });

  app.get(HELLO_PATH, async (req, reply) => {
    const body = JSON.stringify(handlers.hello());
    // Asked to prove our id (a node verifying us as a member it heard of through a relay).
    const challenge = req.headers[HEADER_CHALLENGE];
    if (typeof challenge === "string" && /^[0-9a-f]{32,128}$/.test(challenge)) {
      const proof = auth.proveHello?.(req.peerId!, challenge, body);
      if (proof !== undefined) reply.header(HEADER_PROOF, proof);
    }
    return reply.type("application/json").send(body);
  });

  // gossip "scuttlebutt": SWIM and Scuttlebutt messages (mesh-wire.ts), bounded like a snapshot.
  app.post(
    MESH_PATH,
    { bodyLimit: opts.maxSnapshotBytes ?? DEFAULT_MAX_SNAPSHOT_BYTES },
    async (req, reply) => {
      if (!handlers.onMesh)
        return reply.status(404).send({ error: "this node does not run gossip scuttlebutt" });
      const error = handlers.onMesh(req.peerId!, bodyBytes(req));
      if (error !== undefined) return reply.status(400).send({ error });
      return reply.status(204).send();
    },
  );

  const maxSnapshotBytes = opts.maxSnapshotBytes ?? DEFAULT_MAX_SNAPSHOT_BYTES;
  // Decoded here, within the body limit: a snapshot that does not decode is a 400 before the node sees
  // it; a large one decodes on a worker thread (snapshot-decoder.ts), a busy decoder is a 503.
  const decoder = opts.snapshotDecoder ?? new SnapshotDecoder();
  app.addHook("onClose", async () => decoder.close());
  const snapshotRoute = (scope: FastifyInstance) =>
    scope.post(SNAPSHOT_PATH, { bodyLimit: maxSnapshotBytes }, async (req, reply) => {
      const body = req.body;
      const frame = isBodyChunks(body) ? body.chunks : bodyBytes(req);
      const wireBytes = isBodyChunks(body) ? body.length : bodyBytes(req).byteLength;
      const decoded = await decoder.decode(frame, maxSnapshotBytes); // may take the buffers over
      if (!decoded.ok) {
        return reply.status(decoded.busy ? 503 : 400).send({ error: `bad snapshot: ${decoded.error}` });
      }
      handlers.onMessage(req.peerId!, snapshotMsgFromWire(decoded.snapshot, req.headers), wireBytes);
      return reply.status(204).send();
    });
  // The body stays in the chunks it came in (digested as they come in HMAC mode); the decoder's
  // worker joins them (body-chunks.ts).
  app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser("*", bodyChunksParser(maxSnapshotBytes, auth.mode === "hmac"));
    snapshotRoute(scope);
  });

  app.post(MESSAGE_PATH, async (req, reply) => {
    const bytes = bodyBytes(req);
    const decoded = messageFromWire(parseJson(bytes));
    if (!decoded.ok) return reply.status(400).send({ error: decoded.error });
    handlers.onMessage(req.peerId!, decoded.msg, bytes.byteLength);
    return reply.status(204).send();
  });

  app.post(FORWARD_PATH, { bodyLimit: maxForwardBytes }, async (req, reply) => {
    const parsed = parseForward(parseJson(bodyBytes(req)));
    if (!parsed.ok) return reply.status(400).send({ error: parsed.error });
    const msg = parsed.msg;
    // Raw writes (no stream plumbing): each record goes out as one chunk as soon as it exists.
    reply.hijack();
    const raw = reply.raw;
    const sealer = auth.responseSealer(req.headers);
    // The head is written (and then fixed) by the ack, which says the node's epoch in it, or else
    // by the first record.
    const head = (epoch?: number) => {
      if (raw.headersSent) return;
      const h: Record<string, string> = {
        "content-type": "application/x-ndjson",
        "cache-control": "no-store",
      };
      if (epoch !== undefined) h[EPOCH_HEADER] = String(epoch);
      if (sealer) h[HEADER_RESPONSE_MAC] = sealer.head(200, h);
      raw.writeHead(200, h);
    };
    // Node corks the socket for the tick, so a chunk and the final record written together leave
    // in one packet.
    const put = (line: string, end: boolean) => {
      if (raw.destroyed || raw.writableEnded) return;
      head();
      // A record's tag covers the line without its newline (what the origin splits off).
      const out = sealer ? `${sealer.record(line.slice(0, -1))}\n` : line;
      if (end) raw.end(out);
      else raw.write(out);
    };
    const stream = replyStream(opts.delay, {
      // The ack of an HTTP forward is its response headers (sent with the first record otherwise).
      ack: (epoch) => {
        if (raw.destroyed || raw.headersSent) return;
        head(epoch);
        raw.flushHeaders();
      },
      chunk: (text) => put(streamLine.chunk(text), false),
      final: (m) => put(streamLine.final(m), true),
      gone: () => raw.destroyed,
    });
    handlers.onForward(req.peerId!, msg, stream);
    return reply;
  });

  return app;
}

/** A chunked body's digest for authentication (taken as it arrived; HMAC mode only). */
function digestOf(body: unknown): { sha256: string } | undefined {
  return isBodyChunks(body) && body.sha256 !== undefined ? { sha256: body.sha256 } : undefined;
}

function bodyBytes(req: FastifyRequest): Buffer {
  return req.body instanceof Buffer ? req.body : Buffer.alloc(0);
}

function parseJson(b: Buffer): unknown {
  try {
    return JSON.parse(b.toString("utf8"));
  } catch {
    return undefined;
  }
}
