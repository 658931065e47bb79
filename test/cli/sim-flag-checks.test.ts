/** `prefixmesh sim` and `experiment faults --set`: settings that would silently do nothing are refused. */
import { spawnSync } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseSimOptions, runSimCommand } from "../../src/cli/sim.js";
import { requireBuild } from "../e2e/helpers.js";
import { SIM_DEFAULTS as defaults, quietErr, sink, usageError } from "../sim/sim-cli-fixture.js";

describe("--node-config with a key no node setting has", () => {
  it("is refused and named, top-level or nested, not run with the defaults", () => {
    expect(usageError({ nodeConfig: '{"freshPeerLod":true}' }).message).toMatch(
      /not a node setting: freshPeerLod/,
    );
    const nested = usageError({ gossip: "scuttlebutt", nodeConfig: '{"swim":{"probeIntervalMss":800}}' });
    expect(nested.message).toMatch(/not a node setting: swim\.probeIntervalMss/);
  });

  it("still takes every real setting, nested ones included", () => {
    const r = parseSimOptions({
      ...defaults,
      gossip: "scuttlebutt",
      nodeConfig: '{"freshPeerLoad":true,"swim":{"probeIntervalMs":800}}',
    });
    expect(r.config.node).toMatchObject({ freshPeerLoad: true, swim: { probeIntervalMs: 800 } });
  });
});

describe("experiment faults --set with a nested key no setting has", () => {
  it("exits 2 naming it, before any run", () => {
    // Its own --out: were the key taken, the run must not write into docs/results.
    const out = mkdtempSync(join(tmpdir(), "faults-set-"));
    const set = 'swim={"probeIntervalMss":800}';
    const r = spawnSync(
      process.execPath,
      [requireBuild(), "experiment", "faults", "--synthetic", "--quick", "--out", out, "--set", set],
      { encoding: "utf8", timeout: 30_000 },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/not a node setting: swim\.probeIntervalMss/);
  });
});

describe("sim --json FILE that cannot be written", () => {
  it("fails before the run, not after it with the run's result lost", async () => {
    const out = sink();
    const missing = join(tmpdir(), "no-such-folder-sim-json", "run.json");
    await expect(
      runSimCommand({ ...defaults, requests: "20", json: missing }, { out: out.stream, err: quietErr() }),
    ).rejects.toThrow(/--json: folder .* does not exist/);
    expect(out.text()).toBe("");
  });
});

describe("sim's printed latency percentiles", () => {
  it("are the result's own (--json totals), not a second estimate that disagrees with them", async () => {
    const out = sink();
    const r = await runSimCommand(
      { ...defaults, nodes: "3", requests: "50", policy: "cost-aware" },
      { out: out.stream, err: quietErr() },
    );
    const s = (ms: number) => (ms / 1000).toFixed(3);
    expect(out.text()).toContain(`p50 ${s(r.totals.p50LatencyMs)} s   p99 ${s(r.totals.p99LatencyMs)} s`);
  });
});

describe("sim's link-fault modifiers without a link fault", () => {
  it("are refused, not ignored", () => {
    expect(usageError({ reorderMaxMs: "50" }).message).toMatch(
      /--reorder-max-ms applies only with --reorder/,
    );
    expect(usageError({ loss: "0.1", reorderMaxMs: "50" }).message).toMatch(/only with --reorder/);
    expect(usageError({ faultsUntilMs: "5000", partition: ["0/1@0:100"] }).message).toMatch(
      /--faults-until-ms applies only with --loss, --dup or --reorder/,
    );
  });

  it("still apply with one", () => {
    const r = parseSimOptions({ ...defaults, reorder: "0.1", reorderMaxMs: "50", faultsUntilMs: "5000" });
    expect(r.config.faults?.network).toMatchObject({ reorderProb: 0.1, reorderMaxMs: 50, untilMs: 5000 });
    const d = parseSimOptions({ ...defaults, dup: "0.1", faultsUntilMs: "5000" });
    expect(d.config.faults?.network).toMatchObject({ dupProb: 0.1, untilMs: 5000 });
  });
});

describe("sim --requests beyond what a chat workload holds", () => {
  it("is refused, not run short", async () => {
    const chat = { ...defaults, workload: "synthetic-chat", conversations: "3", turns: "2" };
    const io = { out: sink().stream, err: quietErr() };
    await expect(runSimCommand({ ...chat, requests: "100" }, io)).rejects.toThrow(
      /--requests 100: --workload synthetic-chat has only 6 requests \(3 conversations\)/,
    );
    const r = await runSimCommand({ ...chat, requests: "6" }, io);
    expect(r.totals.requests).toBe(6);
  });
});
