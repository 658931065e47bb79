/**
 * A node config whose SWIM settings contradict each other is the caller's input: `validate` refuses
 * it as a SimConfigError (the CLI's one-line exit 2) before any node is built, not as a bare Error
 * thrown from inside a node's constructor mid-setup.
 */
import { describe, expect, it } from "vitest";
import { SimConfigError, validate } from "../../src/sim/setup.js";
import type { SimConfig } from "../../src/sim/types.js";
import { daemonSimConfig } from "./helpers.js";

const base = daemonSimConfig(1, 4);
const badSwim = { swim: { probeIntervalMs: 1_000, probeTimeoutMs: 5_000 } };

describe("SWIM settings that contradict each other", () => {
  it("are refused as a SimConfigError when the nodes run SWIM (--gossip or the node config's gossip)", () => {
    for (const c of [
      { ...base, gossip: "scuttlebutt", node: badSwim },
      // The node config's mode is the one the nodes run (nodeSettings spreads it last).
      { ...base, gossip: "full", node: { ...badSwim, gossip: "scuttlebutt" } },
    ] as SimConfig[]) {
      expect(() => validate(c, 10), JSON.stringify(c)).toThrow(SimConfigError);
      expect(() => validate(c, 10)).toThrow(
        /invalid simulation config: .*probeTimeoutMs must not exceed probeIntervalMs/,
      );
    }
  });

  it("are left alone under the full mesh, which runs no SWIM", () => {
    expect(() => validate({ ...base, gossip: "full", node: badSwim }, 10)).not.toThrow();
  });

  it("that agree pass", () => {
    const good = { swim: { probeIntervalMs: 1_000, probeTimeoutMs: 500 } };
    expect(() => validate({ ...base, gossip: "scuttlebutt", node: good }, 10)).not.toThrow();
  });
});

describe("other settings read in the mode the nodes run", () => {
  it("the oracle is refused when the node config runs SWIM, and a node named twice as unauthenticated", () => {
    const oracle = { ...base, gossip: "full", oracle: true, node: { gossip: "scuttlebutt" } } as SimConfig;
    expect(() => validate(oracle, 10)).toThrow(/oracle .* runs with gossip "full" only/);
    const twice = {
      ...base,
      gossip: "scuttlebutt",
      faults: { node: { unauthenticated: [1, 1] } },
    } as SimConfig;
    expect(() => validate(twice, 10)).toThrow(/unauthenticated names a node twice/);
    const once = { ...base, gossip: "scuttlebutt", faults: { node: { unauthenticated: [1] } } } as SimConfig;
    expect(() => validate(once, 10)).not.toThrow();
  });
});
