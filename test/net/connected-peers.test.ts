/**
 * Connections kept to at most `maxConnectedPeers` peers (connected-peers.ts, transport-client.ts):
 * the LRU alone against a naive model, then a real client and three real peer servers on loopback.
 */
import { mkdtempSync, rmSync } from "node:fs";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import fc from "fast-check";
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { loadTlsMaterial } from "../../src/net/auth/tls.js";
import { ConnectedPeers } from "../../src/net/connected-peers.js";
import type { PeerServerHandlers } from "../../src/net/peer-handlers.js";
import { hmacAuth, mtlsAuth, type PeerAuth } from "../../src/net/transport-auth.js";
import { PeerClient } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { waitFor } from "../e2e/helpers.js";
import { fwd, resultFor, SECRET } from "./fixtures.js";

describe("ConnectedPeers", () => {
  it("keeps the most recently used peers; past the bound it names the least recent, oldest first", () => {
    const c = new ConnectedPeers(2);
    expect(c.use("a")).toEqual([]);
    expect(c.use("b")).toEqual([]);
    expect(c.use("a")).toEqual([]); // a is the most recent now
    expect(c.use("c")).toEqual(["b"]);
    c.drop("b");
    expect([c.size, c.has("a"), c.has("c")]).toEqual([2, true, true]);
  });

  it("a peer that cannot be released stays and is named again at the next use", () => {
    const c = new ConnectedPeers(1);
    c.use("a");
    expect(c.use("b")).toEqual(["a"]); // not dropped: a is busy
    expect(c.use("c")).toEqual(["a", "b"]);
  });

  it("matches a naive model: after any uses, with everything named dropped, the last `max` distinct remain", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.array(fc.integer({ min: 0, max: 9 }), { maxLength: 60 }),
        (max, uses) => {
          const c = new ConnectedPeers(max);
          const recent: string[] = [];
          for (const u of uses) {
            const id = `p${u}`;
            for (const gone of c.use(id)) c.drop(gone);
            const at = recent.indexOf(id);
            if (at >= 0) recent.splice(at, 1);
            recent.push(id);
            const want = recent.slice(-max);
            expect(c.size).toBe(want.length);
            for (const w of want) expect(c.has(w)).toBe(true);
          }
        },
      ),
    );
  });
});

const servers: FastifyInstance[] = [];
const clients: PeerClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/**
 * A real peer server `id` answering each forward with its reqId, chunk by chunk, after `maxTokens`
 * ms; counts open sockets. A forward whose reqId starts with `held` waits in `held` until the test
 * calls its release.
 */
async function peer(id: string, auth: PeerAuth = hmacAuth(id, SECRET)) {
  const open = new Set<Socket>();
  const held = new Map<string, () => void>();
  const tls = { handshakes: 0, resumed: 0 };
  const handlers: PeerServerHandlers = {
    hello: () => ({ id, cluster: "c1", model: "m", protocol: PROTOCOL_VERSION }),
    isKnownPeer: (from) => from === "A",
    onMessage() {},
    onMesh: () => undefined,
    onForward: (_from, msg, reply) => {
      const finish = () => {
        for (const ch of msg.reqId) reply.chunk(ch);
        reply.finish(resultFor(msg, msg.reqId, id));
      };
      if (msg.reqId.startsWith("held")) held.set(msg.reqId, finish);
      else setTimeout(finish, msg.request.maxTokens);
    },
  };
  const server = buildPeerServer({ auth, handlers });
  server.server.on("connection", (s: Socket) => {
    open.add(s);
    s.on("close", () => open.delete(s));
  });
  server.server.on("secureConnection", (t: TLSSocket) => {
    tls.handshakes++;
    if (t.isSessionReused()) tls.resumed++;
  });
  servers.push(server);
  const url = await server.listen({ host: "127.0.0.1", port: 0 });
  return { url, open, tls, held };
}

async function answer(c: PeerClient, to: string, reqId: string, ms = 1): Promise<string> {
  const r = await c.forward(to, fwd(reqId, ms), () => {});
  return r.type === "result" ? `${r.result.text}@${r.timing.servedBy}` : `error ${r.type}`;
}

/** Three peer servers and a client bounded to 2 of them. */
async function threePeers() {
  const [p1, p2, p3] = await Promise.all([peer("P1"), peer("P2"), peer("P3")]);
  const c = new PeerClient({ auth: hmacAuth("A", SECRET), maxConnectedPeers: 2 });
  clients.push(c);
  for (const [id, p] of [
    ["P1", p1],
    ["P2", p2],
    ["P3", p3],
  ] as const)
    c.setPeer(id, p.url);
  return { c, p1, p2, p3 };
}

describe("PeerClient with maxConnectedPeers 2", () => {
  it("closes the least recently used peer's connections for a third, and reconnects to it on demand", async () => {
    const { c, p1, p2, p3 } = await threePeers();
    expect(await answer(c, "P1", "r1")).toBe("r1@P1");
    await c.send("P1", { type: "goodbye" }); // the pool too, not only the channel
    expect(await answer(c, "P2", "r2")).toBe("r2@P2");
    expect(p1.open.size).toBeGreaterThan(0);
    expect(await answer(c, "P3", "r3")).toBe("r3@P3");
    await waitFor(() => p1.open.size === 0, 10_000, "P1's connections closed");
    expect(c.connectedPeers).toBe(2);
    expect(p2.open.size).toBeGreaterThan(0);
    expect(p3.open.size).toBeGreaterThan(0);
    // P1 again: reconnected, and now P2 is the least recent.
    expect(await answer(c, "P1", "r4")).toBe("r4@P1");
    await waitFor(() => p2.open.size === 0, 10_000, "P2's connections closed");
    expect(c.connectedPeers).toBe(2);
  }, 30_000);

  it("keeps a peer's channel while a forward is open on it; the answer arrives whole", async () => {
    const { c, p1 } = await threePeers();
    const chunks: string[] = [];
    const slow = c.forward("P1", fwd("held-1"), (t) => chunks.push(t));
    await waitFor(() => p1.held.has("held-1"), 10_000, "P1 holding the forward");
    expect(await answer(c, "P2", "r2")).toBe("r2@P2");
    expect(await answer(c, "P3", "r3")).toBe("r3@P3");
    // Past the bound of 2, but P1's channel carries an open forward: it stays.
    expect(c.connectedPeers).toBe(3);
    expect(p1.open.size).toBeGreaterThan(0);
    p1.held.get("held-1")?.();
    expect(await slow).toMatchObject({
      type: "result",
      result: { text: "held-1" },
      timing: { servedBy: "P1" },
    });
    expect(chunks.join("")).toBe("held-1");
    // Released at the next use past the bound, once nothing is open on it.
    expect(await answer(c, "P3", "r4")).toBe("r4@P3");
    await waitFor(() => c.connectedPeers === 2, 10_000, "back within the bound");
    await waitFor(() => p1.open.size === 0, 10_000, "P1's channel closed");
  }, 30_000);
});

describe("PeerClient with maxConnectedPeers 1, mutual TLS", () => {
  it("resumes the TLS session when a released peer is reached again (no full handshake)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "pm-conn-tls-"));
    try {
      await initCa(dir, { clusterId: "c1" });
      for (const id of ["A", "P1", "P2"]) await issueNodeCert(dir, id);
      const [a, t1, t2] = await Promise.all(["A", "P1", "P2"].map((id) => loadTlsMaterial(dir, id)));
      const [p1, p2] = await Promise.all([peer("P1", mtlsAuth(t1!)), peer("P2", mtlsAuth(t2!))]);
      const c = new PeerClient({ auth: mtlsAuth(a!), maxConnectedPeers: 1 });
      clients.push(c);
      c.setPeer("P1", p1.url);
      c.setPeer("P2", p2.url);
      await c.sendMesh("P1", new Uint8Array(8));
      await c.sendMesh("P2", new Uint8Array(8)); // P1 released
      await waitFor(() => p1.open.size === 0, 10_000, "P1's connection closed");
      await c.sendMesh("P1", new Uint8Array(8));
      expect(p1.tls.handshakes).toBe(2);
      expect(p1.tls.resumed).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
