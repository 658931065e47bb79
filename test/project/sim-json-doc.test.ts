/** Every field `prefixmesh sim --json` writes is documented where `sim` is (README's `--json` section). */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runSimCommand } from "../../src/cli/sim.js";
import { SIM_DEFAULTS as defaults, quietErr, sink } from "../sim/sim-cli-fixture.js";

describe("README's sim --json section", () => {
  it("names every key of the result, its records, totals, nodes and profile", async () => {
    const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
    const section = /### The simulator's `--json`\n([\s\S]*?)\n### /.exec(readme)?.[1] ?? "";
    expect(section).not.toBe("");
    const dir = mkdtempSync(join(tmpdir(), "pm-sim-json-doc-"));
    try {
      const json = join(dir, "run.json");
      // A late crash, so faultsNeverBegun is written too.
      const o = { ...defaults, requests: "8", crash: ["1@100000000"], json };
      await runSimCommand(o, { out: sink().stream, err: quietErr() });
      const r = JSON.parse(readFileSync(json, "utf8"));
      const keys = [
        ...Object.keys(r),
        ...Object.keys(r.records[0]),
        ...Object.keys(r.totals),
        ...Object.keys(r.totals.bytesByTime),
        ...Object.keys(r.perNode[0]),
        ...Object.keys(r.profile),
        ...Object.keys(r.faultsNeverBegun),
      ];
      const missing = [...new Set(keys)].filter((k) => !section.includes(`\`${k}\``));
      expect(missing).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
