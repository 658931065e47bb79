/** A static peer becomes a member only if its hello matches: cluster, model, protocol, and a sound shape. */
import { createServer, type Server } from "node:http";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

let node: NodeHandle | undefined;
let peer: Server | undefined;
afterEach(async () => {
  await node?.stop();
  await new Promise((r) => (peer ? peer.close(r) : r(undefined)));
  node = undefined;
  peer = undefined;
});

/**
 * Node A (insecure mode) with one static peer B: a test double, a plain HTTP server answering
 * `GET /peer/hello` with `hello` (an older or later build is one whose hello says so).
 */
async function nodeWithPeerSaying(hello: (model: string) => object) {
  const [api, peerPort, bPort] = await Promise.all([0, 1, 2].map(() => freePort("127.0.0.1")));
  let model = "";
  peer = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    res.end(req.url === "/peer/hello" ? JSON.stringify(hello(model)) : "{}");
  });
  await new Promise<void>((r) => peer?.listen(bPort, "127.0.0.1", r));
  const s = resolveNodeSettings(
    {
      id: "A",
      engine: "sim",
      // The full mesh's check of its static peers (scuttlebutt verifies members itself:
      // mesh-membership.test.ts).
      gossip: "full",
      insecure: true,
      logLevel: "silent",
      listen: `127.0.0.1:${api}`,
      peerListen: `127.0.0.1:${peerPort}`,
      peers: `B=http://127.0.0.1:${bPort}`,
    },
    {},
  );
  node = await startNode(s, { logger: pino({ level: "silent" }) });
  model = node.runtime.modelId;
  return node;
}

/** Waits until A has decided about B: refused (not a known peer) or verified (its hello noted). */
async function decision(n: NodeHandle): Promise<"refused" | "member"> {
  for (const t0 = Date.now(); Date.now() - t0 < 5000; ) {
    if (!n.runtime.peerHandlers().isKnownPeer("B")) return "refused";
    const view = n.runtime.clusterView() as { peers: { id: string; promptText: boolean }[] };
    if (view.peers.find((p) => p.id === "B")?.promptText === false) return "member";
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error("A never decided about B");
}

describe("static peers: the hello check", () => {
  const good = (model: string) => ({
    id: "B",
    cluster: "prefixmesh",
    model,
    protocol: PROTOCOL_VERSION,
    promptText: false,
  });

  it("admits a peer of the same cluster, model and protocol", async () => {
    expect(await decision(await nodeWithPeerSaying(good))).toBe("member");
  });

  it("admits a later peer that still speaks our protocol, and says which versions it takes", async () => {
    const later = (m: string) => ({
      ...good(m),
      protocol: PROTOCOL_VERSION + 1,
      minProtocol: PROTOCOL_VERSION,
    });
    const n = await nodeWithPeerSaying(later);
    expect(await decision(n)).toBe("member");
    expect(n.runtime.admin.hello()).toMatchObject({
      protocol: PROTOCOL_VERSION,
      minProtocol: PROTOCOL_VERSION,
    });
    expect(n.runtime.clusterView()).toMatchObject({
      protocol: PROTOCOL_VERSION,
      minProtocol: PROTOCOL_VERSION,
    });
  });

  it("refuses a peer in another --gossip mode, naming both, and says its own", async () => {
    const n = await nodeWithPeerSaying((m) => ({ ...good(m), gossip: "scuttlebutt" }));
    expect(await decision(n)).toBe("refused");
    expect(n.runtime.admin.refusal("B")).toBe(
      "peer 'B' runs --gossip scuttlebutt, this node full: set the same mode on every node",
    );
    expect(n.runtime.admin.hello()).toMatchObject({ gossip: "full" });
  });

  it("refuses a protocol 2 peer, saying both ranges and to upgrade the peer", async () => {
    const n = await nodeWithPeerSaying((m) => ({ ...good(m), protocol: 2 }));
    expect(await decision(n)).toBe("refused");
    expect(n.runtime.admin.refusal("B")).toMatch(
      /^peer 'B' speaks protocols 2\.\.2, this node accepts 3\.\.3 \(.+\): upgrade the peer$/,
    );
  });

  it.each([
    ["another cluster", (m: string) => ({ ...good(m), cluster: "other" })],
    ["another model", (m: string) => ({ ...good(m), model: `${m}-other` })],
    ["another protocol", (m: string) => ({ ...good(m), protocol: PROTOCOL_VERSION + 1 })],
    ["another id", (m: string) => ({ ...good(m), id: "C" })],
    ["a malformed hello", (m: string) => ({ ...good(m), id: "B B" })],
  ])("refuses a peer announcing %s", async (_what, hello) => {
    expect(await decision(await nodeWithPeerSaying(hello))).toBe("refused");
  });
});
