import pino from "pino";
import { resolveNodeSettings } from "../../src/cli/config.js";
import type { Engine } from "../../src/core/engine.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { startNode } from "../../src/server/runtime/start-node.js";

/**
 * Two in-process nodes A and B peered with each other (insecure, loopback), the simulated engine
 * time-scaled unless `engines` gives others, fast anti-entropy; `extra` overrides node settings.
 */
export async function pair(extra: Record<string, unknown>, engines: { A?: Engine; B?: Engine } = {}) {
  const ports = await Promise.all([0, 1, 2, 3].map(() => freePort("127.0.0.1")));
  const common = {
    engine: "sim",
    pollMs: "50",
    simTimeScale: "0.02",
    insecure: true,
    logLevel: "silent",
    ...extra,
  };
  const logger = pino({ level: "silent" });
  // Each node peers with the other's peer port.
  const settings = (id: string, api: number, peer: number, other: string, otherPeer: number) =>
    resolveNodeSettings(
      {
        ...common,
        id,
        listen: `127.0.0.1:${api}`,
        peerListen: `127.0.0.1:${peer}`,
        peers: `${other}=http://127.0.0.1:${otherPeer}`,
      },
      {},
    );
  const sa = settings("A", ports[0]!, ports[1]!, "B", ports[3]!);
  const sb = settings("B", ports[2]!, ports[3]!, "A", ports[1]!);
  return Promise.all([
    startNode(sa, { logger, ...(engines.A ? { engine: engines.A } : {}) }),
    startNode(sb, { logger, ...(engines.B ? { engine: engines.B } : {}) }),
  ]);
}
