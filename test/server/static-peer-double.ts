/**
 * Node A (insecure, full mesh, the sim engine) with one static peer B: a test double, a plain HTTP
 * server answering `GET /peer/hello` with `hello(model)` (an older or later build, or a misconfigured
 * one, is one whose hello says so) and `{}` to anything else. The full mesh's check of its static
 * peers is under test (scuttlebutt verifies members itself: mesh-membership.test.ts).
 */
import { createServer, type Server } from "node:http";
import pino from "pino";
import type { RecheckTiming } from "../../src/core/refusals.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

export interface StaticPeerDouble {
  node: NodeHandle;
  /** When the double answered each `GET /peer/hello` (Date.now()). */
  hellos: number[];
  /** Stops the node, then the double. */
  stop(): Promise<void>;
}

export async function nodeWithPeerDouble(
  hello: (model: string) => object,
  recheck?: Partial<RecheckTiming>,
): Promise<StaticPeerDouble> {
  const [api, peerPort, bPort] = await Promise.all([0, 1, 2].map(() => freePort("127.0.0.1")));
  let model = "";
  const hellos: number[] = [];
  const double: Server = createServer((req, res) => {
    res.setHeader("content-type", "application/json");
    if (req.url === "/peer/hello") hellos.push(Date.now());
    res.end(req.url === "/peer/hello" ? JSON.stringify(hello(model)) : "{}");
  });
  await new Promise<void>((r) => double.listen(bPort, "127.0.0.1", r));
  const s = resolveNodeSettings(
    {
      id: "A",
      engine: "sim",
      simTimeScale: "0.02",
      gossip: "full",
      insecure: true,
      logLevel: "silent",
      listen: `127.0.0.1:${api}`,
      peerListen: `127.0.0.1:${peerPort}`,
      peers: `B=http://127.0.0.1:${bPort}`,
    },
    {},
  );
  const node = await startNode(s, { logger: pino({ level: "silent" }), ...(recheck ? { recheck } : {}) });
  model = node.runtime.modelId;
  return {
    node,
    hellos,
    stop: async () => {
      await node.stop();
      await new Promise((r) => double.close(r));
    },
  };
}
