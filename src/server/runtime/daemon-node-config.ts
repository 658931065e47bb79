/**
 * The PrefixNode configuration a daemon builds from its settings: the daemon's node defaults
 * (DAEMON_NODE_DEFAULTS, src/core/node/config.ts) under what the settings and the engine decide.
 * Kept apart from start-node.ts so a test can hold the assembled config to those defaults.
 */
import type { EngineInfo } from "../../core/engine.js";
import { DAEMON_NODE_DEFAULTS, type NodeConfigInput } from "../../core/node/config.js";
import type { RecheckTiming } from "../../core/refusals.js";
import type { NodeSettings } from "../settings/index.js";

export function daemonNodeConfig(
  s: NodeSettings,
  o: {
    peers: readonly string[];
    dynamicPeers: boolean;
    engine: Pick<EngineInfo, "capacityTokens" | "cacheMode" | "needsPromptText" | "abortable">;
    /** The models this node serves (its engine's and its adapters): it runs requests for no other. */
    models?: readonly string[];
    /** When SWIM verifies a refused candidate again (core/refusals.ts). */
    recheck?: RecheckTiming;
  },
): NodeConfigInput {
  return {
    // What the daemon fixes without a setting (answer probes off) comes from here alone.
    ...DAEMON_NODE_DEFAULTS,
    id: s.id,
    peers: [...o.peers],
    // DNS-found peers join at run time, up to --max-peers in all; otherwise the list is fixed.
    ...(o.dynamicPeers ? { maxPeers: s.maxPeers } : {}),
    // SWIM learns its members: at most --max-peers of them, the static peers only its seeds.
    gossip: s.gossip,
    ...(s.gossip === "scuttlebutt"
      ? {
          maxPeers: s.maxPeers,
          ...(s.maxEstimates ? { maxEstimates: s.maxEstimates } : {}),
          ...(o.recheck
            ? {
                swim: {
                  recheckFirstMs: o.recheck.firstMs,
                  recheckMaxMs: o.recheck.maxMs,
                  recheckAfterChangeMs: o.recheck.afterChangeMs,
                },
              }
            : {}),
        }
      : {}),
    policy: s.policy,
    capacityTokens: s.capacityTokens ?? o.engine.capacityTokens,
    cacheMode: o.engine.cacheMode,
    // Runs nobody takes the answer of are aborted where the engine's cache stays as the tree reads it.
    abortRuns: o.engine.abortable === true,
    // A forward without the prompt text is refused (and re-sent with it) when the engine needs text.
    needsPromptText: o.engine.needsPromptText,
    pollMs: s.pollMs,
    downAfterPolls: s.downAfterPolls,
    forwardTimeoutMs: s.forwardTimeoutMs,
    forwardAckTimeoutMs: s.forwardAckTimeoutMs,
    concurrency: s.concurrency,
    maxWaitMs: s.maxWaitMs,
    spotCheckRate: s.spotCheckRate,
    offload: s.offload,
    recentPrefixMs: s.recentPrefixMs,
    advertiseCosts: s.advertiseCosts,
    ...(o.models ? { models: [...o.models] } : {}),
  };
}
