/**
 * Shared-secret mode against captured traffic: what an on-path attacker can do with a request it saw
 * — replay it to the node it was for or to another one, alter, add or drop its x-prefixmesh-*
 * headers, swap its destination — is refused before the node sees anything, and the honest path keeps
 * working beside it.
 */
import type { FastifyInstance } from "fastify";
import { request } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { HEADER_DESTINATION } from "../../src/net/auth/hmac.js";
import type { PeerServerHandlers } from "../../src/net/peer-handlers.js";
import { hmacAuth, type OutgoingPeerRequest, type PeerAuth } from "../../src/net/transport-auth.js";
import { type ForwardTransport, PeerClient } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import {
  CHANNEL_PATH,
  type ForwardMsg,
  PROTOCOL_VERSION,
  type SnapshotMsg,
} from "../../src/net/transport-wire.js";
import { fwd, resultFor, SECRET, snapshotMsg } from "./fixtures.js";

/** A request as the client put it on the wire: enough to send it again, byte for byte. */
interface Captured {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Uint8Array | undefined;
}

/** `auth` that keeps a copy of every request it signs (what an on-path observer would see). */
function recording(auth: PeerAuth): { auth: PeerAuth; seen: Captured[] } {
  const seen: Captured[] = [];
  return {
    seen,
    auth: {
      ...auth,
      sign(req: OutgoingPeerRequest) {
        const headers = auth.sign(req);
        seen.push({ method: req.method, path: req.path, headers, body: req.body && Buffer.from(req.body) });
        return headers;
      },
    },
  };
}

const servers: FastifyInstance[] = [];
const clients: PeerClient[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

/** A peer server for node `self` (shared secret) recording what reached its node and what it refused. */
async function node(self: string) {
  const log = { snapshots: [] as SnapshotMsg[], forwards: [] as ForwardMsg[], rejected: [] as string[] };
  const handlers: PeerServerHandlers = {
    hello: () => ({ id: self, cluster: "c1", model: "m", protocol: PROTOCOL_VERSION }),
    isKnownPeer: (id) => id === "A",
    onMessage(_from, msg) {
      if (msg.type === "snapshot") log.snapshots.push(msg);
    },
    onForward(_from, msg, reply) {
      log.forwards.push(msg);
      reply.finish(resultFor(msg, "ok", self));
    },
    onAuthRejected: (r) => log.rejected.push(r),
  };
  const server = buildPeerServer({ auth: hmacAuth(self, SECRET), handlers });
  servers.push(server);
  const url = await server.listen({ host: "127.0.0.1", port: 0 });
  return { url, log };
}

function clientA(forwardTransport: ForwardTransport = "channel") {
  const rec = recording(hmacAuth("A", SECRET));
  const c = new PeerClient({ auth: rec.auth, forwardTransport });
  clients.push(c);
  return { c, seen: rec.seen };
}

/** Sends `r` to the server at `url` as captured, `headers` changed as given (undefined drops one). */
async function resend(url: string, r: Captured, headers: Record<string, string | undefined> = {}) {
  const h: Record<string, string> = { ...r.headers };
  for (const [k, v] of Object.entries(headers)) {
    if (v === undefined) delete h[k];
    else h[k] = v;
  }
  const res = await request(`${url}${r.path}`, {
    method: r.method as "POST",
    headers: h,
    body: r.body ? Buffer.from(r.body) : undefined,
  });
  const text = await res.body.text();
  return { status: res.statusCode, text };
}

const fullSnapshot = () =>
  snapshotMsg([1, 2, 3], {
    holds: { epoch: 5, version: 9 },
    blocks: 3,
    at: 1795976827696.25,
    echo: { t: 12.5, heldMs: 0.75 },
  });

describe("shared-secret peer authentication against captured requests", () => {
  it("checks a large snapshot's body by the digest taken as its chunks arrived", async () => {
    const b = await node("B");
    const { c, seen } = clientA();
    c.setPeer("B", b.url);
    // About 1.2 MB: many socket reads, digested one by one.
    await c.send("B", snapshotMsg(Array.from({ length: 200_000 }, (_, i) => i * 7 + 1)));
    expect(b.log.snapshots).toHaveLength(1);
    const captured = seen.at(-1)!;
    const altered = Buffer.from(captured.body!);
    altered[altered.byteLength >> 1]! ^= 1;
    const res = await resend(b.url, { ...captured, body: altered });
    expect(res.status).toBe(401);
    expect(res.text).toMatch(/bad-signature/);
    expect(b.log.snapshots).toHaveLength(1);
  });

  it("refuses a snapshot replayed to another node, or to the node it was for", async () => {
    const b = await node("B");
    const cNode = await node("C");
    const { c, seen } = clientA();
    c.setPeer("B", b.url);
    await c.send("B", fullSnapshot());
    const captured = seen.at(-1)!;
    expect(captured.headers[HEADER_DESTINATION]).toBe("B");
    expect(b.log.snapshots).toHaveLength(1);

    const toC = await resend(cNode.url, captured);
    expect(toC.status).toBe(401);
    expect(toC.text).toMatch(/wrong-destination/);
    const again = await resend(b.url, captured);
    expect(again.status).toBe(401);
    expect(again.text).toMatch(/replay/);
    expect(cNode.log.snapshots).toHaveLength(0);
    expect(b.log.snapshots).toHaveLength(1);
    expect(cNode.log.rejected).toEqual(["wrong-destination"]);
    expect(b.log.rejected).toEqual(["replay"]);
  });

  it("refuses a snapshot whose destination was swapped to the node it is replayed to", async () => {
    const b = await node("B");
    const cNode = await node("C");
    const { c, seen } = clientA();
    c.setPeer("B", b.url);
    await c.send("B", fullSnapshot());
    const r = await resend(cNode.url, seen.at(-1)!, { [HEADER_DESTINATION]: "C" });
    expect(r.status).toBe(401);
    expect(r.text).toMatch(/bad-signature/);
    expect(cNode.log.snapshots).toHaveLength(0);
  });

  it("tells a node signing as protocol 1 (no destination) what is wrong", async () => {
    const b = await node("B");
    const { c, seen } = clientA();
    c.setPeer("B", b.url);
    await c.send("B", snapshotMsg([1]));
    const r = await resend(b.url, seen.at(-1)!, { [HEADER_DESTINATION]: undefined });
    expect(r.status).toBe(401);
    expect(r.text).toContain(`old-protocol (signed as peer protocol 1; this node speaks ${PROTOCOL_VERSION}`);
    expect(b.log.rejected).toEqual(["old-protocol"]);
  });

  it.each([
    ["x-prefixmesh-holds", "5:10", "an ack for a version not held"],
    ["x-prefixmesh-blocks", "300", "another block count"],
    ["x-prefixmesh-at", "1795976800000.000", "another send time"],
    ["x-prefixmesh-echo", "12.500:900.000", "a forged round trip"],
    ["x-prefixmesh-holds", undefined, "the ack dropped"],
    ["x-prefixmesh-echo", undefined, "the echo dropped"],
  ])("refuses a snapshot with %s changed to %s (%s), before its node sees it", async (name, value, _why) => {
    const b = await node("B");
    const { c, seen } = clientA();
    c.setPeer("B", b.url);
    await c.send("B", fullSnapshot());
    const r = await resend(b.url, seen.at(-1)!, { [name]: value });
    expect(r.status).toBe(401);
    expect(r.text).toMatch(/bad-signature/);
    expect(b.log.snapshots).toHaveLength(1); // the honest one only
    expect(b.log.rejected).toEqual(["bad-signature"]);
  });

  it("refuses a snapshot with an x-prefixmesh-* header added on the path", async () => {
    const b = await node("B");
    const { c, seen } = clientA();
    c.setPeer("B", b.url);
    await c.send("B", snapshotMsg([1])); // no ack, no echo
    for (const [name, value] of [
      ["x-prefixmesh-holds", "1:1"],
      ["x-prefixmesh-echo", "1.000:0.000"],
      ["x-prefixmesh-anything", "1"],
    ] as const) {
      const r = await resend(b.url, seen.at(-1)!, { [name]: value });
      expect(r.status).toBe(401);
    }
    expect(b.log.rejected).toEqual(["bad-signature", "bad-signature", "bad-signature"]);
    expect(b.log.snapshots).toHaveLength(1);
  });

  it("refuses an HTTP forward replayed to another node or again to its own", async () => {
    const b = await node("B");
    const cNode = await node("C");
    const { c, seen } = clientA("http");
    c.setPeer("B", b.url);
    expect(await c.forward("B", fwd("A-1"), () => {})).toMatchObject({ type: "result", reqId: "A-1" });
    const captured = seen.at(-1)!;
    expect(captured.path).toBe("/peer/forward");
    expect((await resend(cNode.url, captured)).status).toBe(401);
    expect((await resend(b.url, captured)).status).toBe(401);
    expect(b.log.forwards).toHaveLength(1);
    expect(cNode.log.forwards).toHaveLength(0);
  });

  it("refuses a forward channel upgrade replayed to another node or again to its own", async () => {
    const b = await node("B");
    const cNode = await node("C");
    const { c, seen } = clientA("channel");
    c.setPeer("B", b.url);
    expect(await c.forward("B", fwd("A-1"), () => {})).toMatchObject({ type: "result" });
    const upgrade = seen.find((s) => s.path === CHANNEL_PATH)!;
    const statusOf = (url: string) =>
      new Promise<number>((resolve, reject) => {
        const ws = new WebSocket(`${url.replace("http:", "ws:")}${CHANNEL_PATH}`, {
          headers: upgrade.headers,
        });
        ws.once("unexpected-response", (_req, res) => {
          res.resume();
          ws.terminate();
          resolve(res.statusCode ?? 0);
        });
        ws.once("open", () => {
          ws.terminate();
          resolve(101);
        });
        ws.once("error", reject);
      });
    expect(await statusOf(cNode.url)).toBe(401);
    expect(await statusOf(b.url)).toBe(401);
    expect(cNode.log.rejected).toEqual(["wrong-destination"]);
    expect(b.log.rejected).toEqual(["replay"]);
  });

  it("keeps the honest path working: snapshots, messages, forwards over channel and HTTP", async () => {
    const b = await node("B");
    const cNode = await node("C");
    const viaChannel = clientA("channel").c;
    const viaHttp = clientA("http").c;
    for (const c of [viaChannel, viaHttp]) {
      c.setPeer("B", b.url);
      c.setPeer("C", cNode.url);
    }
    const snap = fullSnapshot();
    await viaChannel.send("B", snap);
    await viaChannel.send("C", snap);
    await viaHttp.send("B", { type: "goodbye" });
    for (const [c, id] of [
      [viaChannel, "B"],
      [viaChannel, "C"],
      [viaHttp, "B"],
      [viaHttp, "C"],
    ] as const) {
      expect(await c.forward(id, fwd(`A-${id}`), () => {})).toMatchObject({
        type: "result",
        timing: { servedBy: id },
      });
    }
    expect(await viaHttp.hello("C")).toMatchObject({ id: "C" });
    expect(await viaHttp.probeHello(b.url)).toMatchObject({ hello: { id: "B" } });
    expect(b.log.snapshots).toEqual([snap]);
    expect(cNode.log.snapshots).toEqual([snap]);
    expect(b.log.forwards).toHaveLength(2);
    expect(cNode.log.forwards).toHaveLength(2);
    expect([...b.log.rejected, ...cNode.log.rejected]).toEqual([]);
  });
});
