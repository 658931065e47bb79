/**
 * The daemon and `prefixmesh sim` route with `cost-aware` unless told otherwise; the paper's
 * `affinity` stays selectable by name and remains the core node config's (the paper's) default.
 */
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { registerCluster } from "../../src/cli/cluster.js";
import { registerNode } from "../../src/cli/node.js";
import { registerSim } from "../../src/cli/sim.js";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

function command(name: string): Command {
  const program = new Command("prefixmesh");
  registerSim(program);
  registerNode(program);
  registerCluster(program);
  const c = program.commands.find((x) => x.name() === name);
  if (!c) throw new Error(`no ${name} command`);
  return c;
}

describe("default routing policy", () => {
  it("is cost-aware for `node` (flags > env > file still override it)", () => {
    expect(resolveNodeSettings({ id: "A" }, {}).policy).toBe("cost-aware");
    expect(resolveNodeSettings({ id: "A" }, { PREFIXMESH_POLICY: "affinity" }).policy).toBe("affinity");
    expect(resolveNodeSettings({ id: "A", policy: "affinity" }, {}).policy).toBe("affinity");
  });

  it("is cost-aware for `sim`, and `node`/`cluster` --help say so", () => {
    const sim = command("sim").options.find((o) => o.long === "--policy");
    expect(sim?.defaultValue).toBe("cost-aware");
    for (const name of ["node", "cluster"]) {
      const opt = command(name).options.find((o) => o.long === "--policy");
      expect(opt?.description, name).toMatch(/default cost-aware/);
      // `cluster` passes no --policy when none is given, so its nodes take the node default.
      expect(opt?.defaultValue, name).toBeUndefined();
    }
  });

  it("leaves the core node config on the paper's affinity (the simulator always names a policy)", () => {
    expect(resolveNodeConfig({ id: "A", capacityTokens: 10 }).policy).toBe("affinity");
  });
});
