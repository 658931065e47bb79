/** The daemon's node configuration is DAEMON_NODE_DEFAULTS wherever the settings are left alone. */
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS, type NodeConfig, resolveNodeConfig } from "../../src/core/node/config.js";
import { DEFAULT_POLICY } from "../../src/server/default-policy.js";
import { daemonNodeConfig } from "../../src/server/runtime/daemon-node-config.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { loopbackNodeSettings } from "./helpers.js";

const KEYS = Object.keys(DAEMON_NODE_DEFAULTS) as (keyof typeof DAEMON_NODE_DEFAULTS)[];

function expectDaemonDefaults(c: NodeConfig): void {
  for (const k of KEYS) expect(c[k], k).toEqual(DAEMON_NODE_DEFAULTS[k]);
}

let node: NodeHandle | undefined;
afterEach(async () => {
  await node?.stop();
  node = undefined;
});

describe("the daemon's node configuration", () => {
  it("differs from the core schema's defaults only on the constant's keys", () => {
    // The other direction of the drift: a value the daemon passes on its own that the constant lacks.
    const engine = { capacityTokens: 1_000, cacheMode: "node-managed", needsPromptText: false } as const;
    const daemon = resolveNodeConfig(
      daemonNodeConfig(resolveNodeSettings({ id: "A" }, {}), { peers: ["B"], dynamicPeers: false, engine }),
    );
    const core = resolveNodeConfig({ id: "A", peers: ["B"], ...engine });
    const differ = (Object.keys(daemon) as (keyof NodeConfig)[]).filter(
      (k) => JSON.stringify(daemon[k]) !== JSON.stringify(core[k]),
    );
    expect(differ.length).toBeGreaterThan(0);
    // maxPeers comes from --max-peers, which bounds SWIM's members when the mode is scuttlebutt.
    const fromSettings = ["maxPeers"];
    expect(differ.filter((k) => !(KEYS as string[]).includes(k) && !fromSettings.includes(k))).toEqual([]);
    expect(DEFAULT_POLICY).toBe(DAEMON_NODE_DEFAULTS.policy);
  });

  it("is assembled from default settings as DAEMON_NODE_DEFAULTS", () => {
    const s = resolveNodeSettings({ id: "A" }, {});
    const input = daemonNodeConfig(s, {
      peers: ["B"],
      dynamicPeers: false,
      engine: { capacityTokens: 1_000, cacheMode: "node-managed", needsPromptText: false },
    });
    expectDaemonDefaults(resolveNodeConfig(input));
  });

  it("is what a started daemon's node runs with", async () => {
    const s = await loopbackNodeSettings({ engine: "sim" });
    node = await startNode(s, { logger: pino({ level: "silent" }) });
    expectDaemonDefaults(node.nodeConfig);
  });

  it("still lets a setting override a default", () => {
    const s = resolveNodeSettings({ id: "A", forwardAckTimeoutMs: "400", policy: "affinity" }, {});
    const c = resolveNodeConfig(
      daemonNodeConfig(s, {
        peers: [],
        dynamicPeers: false,
        engine: { capacityTokens: 1, cacheMode: "node-managed", needsPromptText: true },
      }),
    );
    // An engine that runs from text alone makes the node refuse tokens-only forwards (serving.ts).
    expect(c.needsPromptText).toBe(true);
    expect(c.forwardAckTimeoutMs).toBe(400);
    expect(c.policy).toBe("affinity");
    expect(c.answerProbes).toBe(false);
  });

  it("takes --recent-prefix-ms, 0 turning the rule off, and refuses a value past its bound", () => {
    const engine = { capacityTokens: 1, cacheMode: "node-managed", needsPromptText: false } as const;
    const config = (recentPrefixMs?: string) =>
      resolveNodeConfig(
        daemonNodeConfig(
          resolveNodeSettings({ id: "A", ...(recentPrefixMs ? { recentPrefixMs } : {}) }, {}),
          {
            peers: [],
            dynamicPeers: false,
            engine,
          },
        ),
      );
    expect(config().recentPrefixMs).toBeGreaterThan(0);
    expect(config("0").recentPrefixMs).toBe(0);
    expect(config("2500").recentPrefixMs).toBe(2500);
    expect(() => config("600001")).toThrow(/recentPrefixMs|recent-prefix-ms/);
  });
});
