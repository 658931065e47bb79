import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { CliError } from "../../src/cli/errors.js";
import { parseSetting } from "../../src/cli/flags.js";
import { defaultNote } from "../../src/cli/help.js";
import { registerNode } from "../../src/cli/node.js";
import { LlamaCppOptionsSchema } from "../../src/engines/llamacpp/options.js";
import {
  flagName,
  flagSettings,
  nodeSettingsSchema,
  resolveNodeSettings,
  SettingsError,
  settingDoc,
} from "../../src/server/settings/index.js";

describe("one setting checked against the node schema (prefixmesh cluster's flags)", () => {
  it("coerces in-bounds values and names the flag when out of bounds", () => {
    expect(parseSetting("slots", "4")).toBe(4);
    expect(parseSetting("engine", "sim")).toBe("sim");
    expect(() => parseSetting("slots", "65")).toThrow(CliError);
    expect(() => parseSetting("slots", "65")).toThrow(/^--slots: /);
    expect(() => parseSetting("pollMs", "0")).toThrow(/^--poll-ms: /);
    expect(() => parseSetting("engine", "gpu")).toThrow(/^--engine: /);
    // A routing policy is one of the node's: a typo is a usage error before any node starts.
    expect(parseSetting("policy", "cost-aware")).toBe("cost-aware");
    expect(() => parseSetting("policy", "afinity")).toThrow(/^--policy: .*affinity/);
  });
});

describe("a bad value's error says what to write and what was given", () => {
  const bad = (flags: Record<string, unknown>, env: NodeJS.ProcessEnv = {}) => {
    try {
      resolveNodeSettings({ id: "A", engine: "sim", ...flags }, env);
    } catch (err) {
      expect(err).toBeInstanceOf(SettingsError);
      return (err as Error).message;
    }
    throw new Error("accepted");
  };

  it("in words, not zod's", () => {
    expect(bad({ pollMs: "abc" })).toBe("--poll-ms: must be a number, got 'abc'");
    expect(bad({ pollMs: "0" })).toBe("--poll-ms: must be ≥ 1, got '0'");
    expect(bad({ concurrency: "1.5" })).toBe("--concurrency: must be a whole number, got '1.5'");
    expect(bad({ offload: "maybe" })).toBe("--offload: must be true or false (or 1, 0), got 'maybe'");
    expect(bad({ gossip: "fulll" })).toBe("--gossip: must be one of full, scuttlebutt, got 'fulll'");
    expect(bad({}, { PREFIXMESH_FORWARD_TIMEOUT_MS: "30s" })).toBe(
      "PREFIXMESH_FORWARD_TIMEOUT_MS: must be a number, got '30s'",
    );
    expect(() => parseSetting("slots", "65")).toThrow("--slots: must be ≤ 64, got '65'");
  });

  it("refuses an --advertise address peers cannot reach: a wildcard host or port 0", () => {
    for (const a of ["0.0.0.0:9080", "[::]:9080", "10.0.0.1:0"])
      expect(bad({ advertise: a }), a).toMatch(/^--advertise: '.*' is no address peers can reach/);
    expect(resolveNodeSettings({ id: "A", engine: "sim", advertise: "10.0.0.1:9080" }, {}).advertise).toBe(
      "10.0.0.1:9080",
    );
  });
});

describe("help texts state the schema's defaults", () => {
  it("derives the note from the default, and refuses a schema without one", () => {
    expect(defaultNote(z.number().default(7))).toBe("(default 7)");
    expect(() => defaultNote(z.number().optional())).toThrow(/no default/);
  });

  it("node --help shows the applied defaults", () => {
    const program = new Command("prefixmesh");
    registerNode(program);
    const help = program.commands[0]?.helpInformation().replace(/\s+/g, " ") ?? "";
    const poll = nodeSettingsSchema.shape.pollMs.def.defaultValue;
    const slots = LlamaCppOptionsSchema.shape.slots.def.defaultValue;
    expect(help).toMatch(new RegExp(`--poll-ms <ms> Δpoll, the anti-entropy period.*?\\(default ${poll}\\)`));
    expect(help).toMatch(
      new RegExp(`--slots <n> llamacpp engine: KV slots.*?\\(default ${slots} \\(the engine's\\)\\)`),
    );
  });

  it("node's flags are the settings', each with its schema's meaning; the API key is no flag", () => {
    const program = new Command("prefixmesh");
    registerNode(program);
    const options = program.commands[0]?.options ?? [];
    const longs = options.map((o) => o.long);
    expect(longs).toEqual(["--config", ...flagSettings().map(flagName)]);
    expect(longs).not.toContain("--engine-api-key");
    expect(longs).toContain("--body-limit-bytes");
    expect(longs).toContain("--max-snapshot-bytes");
    for (const key of flagSettings()) {
      const o = options.find((x) => x.long === flagName(key));
      expect(o?.description, key).toContain(settingDoc(key).description.replace(/`/g, ""));
    }
  });
});

describe("--poll-ms's help", () => {
  it("describes Δpoll under the default gossip mode, not only under the full mesh", () => {
    const text = settingDoc("pollMs").description;
    expect(text).toMatch(/digests with 3 members \(--gossip scuttlebutt, the default\)/);
    expect(text).toMatch(/snapshot to every peer \(--gossip full/);
  });
});
