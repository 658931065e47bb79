/** A static peer becomes a member only if its hello matches: cluster, model, protocol, and a sound shape. */
import { afterEach, describe, expect, it } from "vitest";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { nodeWithPeerDouble, type StaticPeerDouble } from "./static-peer-double.js";

let double: StaticPeerDouble | undefined;
afterEach(async () => {
  await double?.stop();
  double = undefined;
});

async function nodeWithPeerSaying(hello: (model: string) => object): Promise<NodeHandle> {
  double = await nodeWithPeerDouble(hello);
  return double.node;
}

/** Waits until A has decided about B: refused (not a known peer) or verified (its hello noted). */
async function decision(n: NodeHandle): Promise<"refused" | "member"> {
  // Generous: the hello read can take seconds on a busy machine.
  for (const t0 = Date.now(); Date.now() - t0 < 15_000; ) {
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

describe("static peers: a restart seen in a snapshot", () => {
  const shownB = (n: NodeHandle) => n.runtime.clusterView().peers.find((p) => p.id === "B");
  /** B's own full snapshot in `epoch`, as the peer server hands it to the node. */
  const snapshotOfB = (epoch: number) => ({
    type: "snapshot" as const,
    snapshot: {
      kind: "full" as const,
      header: { sender: "B", epoch, version: 1, tokenCount: 0, capacity: 1024, queueDepth: 0, pushBackMs: 0 },
      body: { blockSize: 16, keys: new Float64Array(0) },
    },
  });

  it("reads its hello again: what it serves now, and whether its engine needs the text", async () => {
    let restarted = false;
    const hello = (model: string) => ({
      id: "B",
      cluster: "prefixmesh",
      model,
      protocol: PROTOCOL_VERSION,
      // Back with another engine: one that needs the prompt text, and a LoRA adapter besides.
      promptText: restarted,
      models: restarted ? [model, "lora-support"] : [model],
    });
    const n = await nodeWithPeerSaying(hello);
    expect(await decision(n)).toBe("member");
    const handlers = n.runtime.peerHandlers();
    handlers.onMessage("B", snapshotOfB(1), 64);
    restarted = true;
    handlers.onMessage("B", snapshotOfB(1), 64); // the same life: nothing to read again
    const hellosBefore = double?.hellos.length ?? 0;
    handlers.onMessage("B", snapshotOfB(2), 64);
    // Generous: the hello read can take seconds on a busy machine.
    for (const t0 = Date.now(); Date.now() - t0 < 15_000 && shownB(n)?.promptText !== true; )
      await new Promise((r) => setTimeout(r, 20));
    expect(shownB(n)).toMatchObject({ promptText: true, models: [n.runtime.modelId, "lora-support"] });
    expect(double?.hellos.length).toBe(hellosBefore + 1);
  });
});
