/**
 * Two in-process nodes, A and B, on 127.0.0.1 (free ports), each peered with the other's peer port,
 * insecure and silent: the set-up of every two-node test that drives `startNode` directly.
 */
import pino from "pino";
import type { Engine } from "../src/core/engine.js";
import { freePort } from "../src/server/cluster/launcher.js";
import { type NodeHandle, startNode } from "../src/server/runtime/start-node.js";
import { resolveNodeSettings, SETTING_KEYS } from "../src/server/settings/index.js";

/**
 * Starts A (i = 0) and B (i = 1). `settingsOf(i)` gives node i's settings beside its id, addresses and
 * peer (it may override `insecure` and `logLevel`); `engines[i]`, if given, is node i's engine instead
 * of the one its settings name. The caller stops both.
 */
export async function startPair(
  settingsOf: (i: 0 | 1) => Record<string, unknown>,
  engines: readonly (Engine | undefined)[] = [],
): Promise<[NodeHandle, NodeHandle]> {
  const ports = await Promise.all([0, 1, 2, 3].map(() => freePort("127.0.0.1")));
  const logger = pino({ level: "silent" });
  // As a config file's: a misspelt or core-only name would otherwise be dropped without a word.
  // Checked for both before either starts, so a refusal leaves no node running.
  const names = [...Object.keys(settingsOf(0)), ...Object.keys(settingsOf(1))];
  const unknown = [...new Set(names)].filter((k) => !(SETTING_KEYS as string[]).includes(k));
  if (unknown.length > 0) throw new Error(`unknown node settings: ${unknown.join(", ")}`);
  const start = (i: 0 | 1) => {
    const settings = resolveNodeSettings(
      {
        insecure: true,
        logLevel: "silent",
        ...settingsOf(i),
        id: i === 0 ? "A" : "B",
        listen: `127.0.0.1:${ports[2 * i]}`,
        peerListen: `127.0.0.1:${ports[2 * i + 1]}`,
        peers: `${i === 0 ? "B" : "A"}=http://127.0.0.1:${ports[2 * (1 - i) + 1]}`,
      },
      {},
    );
    const engine = engines[i];
    return startNode(settings, { logger, ...(engine ? { engine } : {}) });
  };
  const pair = await Promise.all([start(0), start(1)]);
  // gossip "scuttlebutt": `peers` are only seeds, so each is a member of the other only once SWIM
  // verified and admitted it (the full mesh's static members are there from the start).
  if (pair[0].nodeConfig.gossip === "scuttlebutt" || pair[1].nodeConfig.gossip === "scuttlebutt") {
    // In process, not over HTTP: a pooled client connection would count against --max-connections.
    const holds = (n: NodeHandle, id: string) =>
      (n.runtime.clusterView() as { peers: { id: string }[] }).peers.some((p) => p.id === id);
    for (const deadline = Date.now() + 15_000; !(holds(pair[0], "B") && holds(pair[1], "A")); ) {
      if (Date.now() > deadline) {
        await Promise.all(pair.map((n) => n.stop()));
        throw new Error("A and B never became members of each other (gossip scuttlebutt)");
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  return pair;
}
