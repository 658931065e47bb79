/**
 * The peer transport tests' harness: fake node handlers recording what the transport delivered,
 * peer servers and clients closed after each test, plain HTTP peers scripted to misbehave, and
 * hello test doubles of older and later builds.
 */
import { createServer, type RequestListener, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterEach } from "vitest";
import { checkPeerHello } from "../../src/net/discovery.js";
import type { PeerServerHandlers } from "../../src/net/peer-handlers.js";
import type { PeerAuth } from "../../src/net/transport-auth.js";
import { type ForwardTransport, PeerClient } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import {
  type ForwardMsg,
  type LoneMessage,
  PROTOCOL_VERSION,
  type SnapshotMsg,
} from "../../src/net/transport-wire.js";
import { resultFor } from "./fixtures.js";

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

/** The hello of a protocol 2 node (a test double, not a real old build). */
export const protocol2Double = () => ({ id: "B", cluster: "c1", model: "m", protocol: 2 });
/** The hello of a later node speaking protocol 4 that still speaks 3 (a test double). */
export const laterDouble = () => ({ id: "B", cluster: "c1", model: "m", protocol: 4, minProtocol: 3 });

/**
 * Starts peer servers, clients and raw peers that are closed after each test. Call it at a test
 * file's top level: it registers that file's afterEach.
 */
export function peerHarness() {
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

  function client(auth: PeerAuth, timeouts = {}, forwardTransport: ForwardTransport = "channel") {
    const c = new PeerClient({ auth, timeouts, forwardTransport });
    clients.push(c);
    return c;
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

  /** A plain HTTP server scripted to misbehave as a peer; closed after each test. */
  async function rawPeer(handler: RequestListener): Promise<string> {
    const srv = createServer(handler);
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    raws.push(srv);
    return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  }

  return { start, client, judgeHello, rawPeer };
}
