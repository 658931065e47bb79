/** `prefixmesh sim`: flag validation and the printed summary (in-process, synthetic workload). */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { CliError } from "../../src/cli/errors.js";
import { parseSimOptions, registerSim, runSimCommand, type SimOptions } from "../../src/cli/sim.js";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import { faultFlags, faultScheduleFor } from "../../src/sim/fault-schedule.js";
import { SIM_DEFAULTS as defaults, quietErr, sink, usageError } from "./sim-cli-fixture.js";

describe("prefixmesh sim", () => {
  it("rejects bad flags with a clear CliError (exit code 2)", () => {
    const bad: [Partial<SimOptions>, RegExp][] = [
      [{ nodes: "0" }, /--nodes must be ≥ 1/],
      [{ nodes: "two" }, /--nodes must be a number/],
      [{ policy: "fastest" }, /^--policy: .*affinity/],
      [{ commMs: "-1" }, /--comm-ms/],
      [{ pollMs: "0" }, /--poll-ms/],
      [{ workload: "imagenet" }, /--workload must be one of/],
      [{ seed: "1.5" }, /--seed must be a whole number/],
      [{ profile: "gpu9000" }, /--profile must be one of/],
      [{ requests: "0" }, /--requests/],
      // A folder named for a workload that reads none: the run would be synthetic, silently.
      [{ mmluDir: "/data/mmlu" }, /--mmlu-dir applies only to the mmlu\* workloads, not 'synthetic'/],
      [{ workload: "synthetic-zipf", mmluDir: "/data/mmlu" }, /--workload mmlu-zipf/],
    ];
    for (const [o, re] of bad) expect(usageError(o).message, JSON.stringify(o)).toMatch(re);
  });

  it("says where MMLU is missing instead of crashing", async () => {
    const out = sink();
    await expect(
      runSimCommand(
        { ...defaults, workload: "mmlu", mmluDir: "/nonexistent/mmlu" },
        { out: out.stream, err: process.stderr },
      ),
    ).rejects.toThrow(/MMLU data not found at '\/nonexistent\/mmlu'/);
  });

  it("prints latency, hit rates, hotspot share and gossip cost; writes --json", async () => {
    const out = sink();
    const dir = mkdtempSync(join(tmpdir(), "pm-sim-"));
    const json = join(dir, "r.json");
    const err = quietErr();
    try {
      const r = await runSimCommand({ ...defaults, requests: "400", json }, { out: out.stream, err });
      const text = out.text();
      expect(text).toMatch(/latency\s+mean \d+\.\d{3} s\s+p50 \d+\.\d{3} s\s+p99 \d+\.\d{3} s/);
      expect(text).toMatch(/hit rate\s+expected \d+\.\d% {3}actual \d+\.\d%/);
      expect(text).toMatch(/hotspot\s+\d+\.\d% of requests on n\d/);
      expect(text).toMatch(/messages\s+\d+ \(/);
      expect(text).toMatch(/engine\s+\d+ runs, 0 duplicate/);
      expect(text).toContain("SYNTHETIC");
      expect(r.totals.answered).toBe(400);
      const saved = JSON.parse(readFileSync(json, "utf8"));
      expect(saved.records).toHaveLength(400);
      expect(saved.totals.answered).toBe(400);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("counts one node in the singular in the summary's first line", async () => {
    const one = sink();
    await runSimCommand({ ...defaults, nodes: "1", requests: "3" }, { out: one.stream, err: quietErr() });
    expect(one.text()).toMatch(/^prefixmesh sim — 1 node, policy/);
    const four = sink();
    await runSimCommand({ ...defaults, requests: "3" }, { out: four.stream, err: quietErr() });
    expect(four.text()).toMatch(/^prefixmesh sim — 4 nodes, policy/);
  });
});

describe("prefixmesh sim — fault flags", () => {
  it("parses crashes and link faults, rejecting bad ones", () => {
    const { config } = parseSimOptions({
      ...defaults,
      loss: "0.1",
      dup: "0.01",
      crash: ["1@6000:9000", "n2@100"],
    });
    expect(config.faults).toEqual({
      network: { lossProb: 0.1, dupProb: 0.01 },
      node: {
        crashes: [
          { node: 1, atMs: 6000, restartAtMs: 9000 },
          { node: 2, atMs: 100 },
        ],
      },
    });
    expect(() => parseSimOptions({ ...defaults, crash: ["9@1"] })).toThrow(/does not exist/);
    expect(() => parseSimOptions({ ...defaults, crash: ["1@9:5"] })).toThrow(/after the crash/);
    expect(() => parseSimOptions({ ...defaults, crash: ["soon"] })).toThrow(/NODE@MS/);
    expect(() => parseSimOptions({ ...defaults, loss: "2" })).toThrow(/--loss/);
  });

  it("parses healing partitions and reordering, rejecting bad ones", () => {
    const { config } = parseSimOptions({ ...defaults, reorder: "0.2", partition: ["0,1/2,3@1000:5000"] });
    expect(config.faults).toEqual({
      network: {
        reorderProb: 0.2,
        partitions: [
          {
            startMs: 1000,
            endMs: 5000,
            groups: [
              [0, 1],
              [2, 3],
            ],
          },
        ],
      },
    });
    expect(() => parseSimOptions({ ...defaults, partition: ["0,1@1:2"] })).toThrow(/two groups/);
    expect(() => parseSimOptions({ ...defaults, partition: ["0,1/1,2@1:2"] })).toThrow(/twice/);
    expect(() => parseSimOptions({ ...defaults, partition: ["0/9@1:2"] })).toThrow(/does not exist/);
    expect(() => parseSimOptions({ ...defaults, partition: ["0/1@5:2"] })).toThrow(/heal/);
    expect(() => parseSimOptions({ ...defaults, partition: ["0|1"] })).toThrow(/GROUP\/GROUP/);
    expect(() => parseSimOptions({ ...defaults, reorder: "-1" })).toThrow(/--reorder/);
  });

  it("answers everything, correctly, across a partition that heals", async () => {
    const out = sink();
    const err = quietErr();
    const r = await runSimCommand(
      {
        ...defaults,
        requests: "300",
        partition: ["0,1/2,3@10000:40000"],
        reorder: "0.2",
        forwardTimeoutMs: "2000",
      },
      { out: out.stream, err },
    );
    expect(r.totals.answered).toBe(300);
    expect(r.totals.incorrect).toBe(0);
    expect(out.text()).toMatch(/partitions 1/);
  });

  it("still answers everything when a node crashes mid-run", async () => {
    const out = sink();
    const err = quietErr();
    const r = await runSimCommand(
      { ...defaults, requests: "300", crash: ["1@20000:40000"], loss: "0.05", forwardTimeoutMs: "2000" },
      { out: out.stream, err },
    );
    expect(r.totals.answered).toBe(300);
    expect(r.totals.incorrect).toBe(0);
    expect(r.perNode[1]?.crashes).toBe(1);
  });
});

describe("prefixmesh sim --oracle / --rate", () => {
  const base: SimOptions = { ...defaults, policy: "cost-aware" };

  it("parses the oracle flag and an open-loop rate", () => {
    const o = parseSimOptions({ ...base, oracle: true, rate: "8" });
    expect(o.config.oracle).toBe(true);
    expect(o.config.policy).toBe("cost-aware");
    expect(o.rate).toBe(8);
    expect(parseSimOptions(base).config.oracle).toBeUndefined();
  });

  it("rejects a bad rate with a CliError", () => {
    expect(() => parseSimOptions({ ...base, rate: "0" })).toThrow(CliError);
    expect(() => parseSimOptions({ ...base, rate: "fast" })).toThrow(/--rate/);
  });
});

describe("prefixmesh sim --gossip / --max-estimates", () => {
  const base: SimOptions = { ...defaults, policy: "cost-aware" };

  it("selects the mesh protocol; full stays the default", () => {
    expect(parseSimOptions(base).config.gossip).toBeUndefined();
    const o = parseSimOptions({ ...base, gossip: "scuttlebutt", maxEstimates: "8" });
    expect(o.config.gossip).toBe("scuttlebutt");
    expect(o.config.maxEstimates).toBe(8);
    expect(optionsOf(["--gossip", "scuttlebutt", "--max-estimates", "4"])).toMatchObject({
      gossip: "scuttlebutt",
      maxEstimates: "4",
    });
  });

  it("refuses a bad mode, a bound without scuttlebutt, and the oracle with scuttlebutt", () => {
    expect(() => parseSimOptions({ ...base, gossip: "epidemic" })).toThrow(/--gossip/);
    expect(() => parseSimOptions({ ...base, maxEstimates: "8" })).toThrow(/needs --gossip scuttlebutt/);
    // The daemon's configuration runs scuttlebutt unless told otherwise: the bound applies.
    expect(parseSimOptions({ ...base, daemonConfig: true, maxEstimates: "8" }).config.maxEstimates).toBe(8);
    expect(() => parseSimOptions({ ...base, daemonConfig: true, gossip: "full", maxEstimates: "8" })).toThrow(
      /needs --gossip scuttlebutt/,
    );
    // The node config's mode is the one the nodes run, either way.
    const viaNode = { ...base, maxEstimates: "8", nodeConfig: '{"gossip":"scuttlebutt"}' };
    expect(parseSimOptions(viaNode).config.maxEstimates).toBe(8);
    expect(() =>
      parseSimOptions({ ...base, gossip: "scuttlebutt", maxEstimates: "8", nodeConfig: '{"gossip":"full"}' }),
    ).toThrow(/needs --gossip scuttlebutt/);
    expect(() => parseSimOptions({ ...base, gossip: "scuttlebutt", maxEstimates: "0" })).toThrow(CliError);
    expect(() => parseSimOptions({ ...base, gossip: "scuttlebutt", oracle: true })).toThrow(/--oracle/);
    // centralized runs on the oracle's global view, which scuttlebutt's nodes would throw away.
    expect(() => parseSimOptions({ ...base, gossip: "scuttlebutt", policy: "centralized" })).toThrow(
      /--policy centralized/,
    );
  });
});

/** `args` as the sim command's action receives them (commander's own parsing, nothing run). */
function optionsOf(args: string[]): SimOptions {
  const program = new Command("prefixmesh").exitOverride();
  registerSim(program);
  const sim = program.commands[0] as Command;
  sim.action(() => {});
  program.parse(["sim", ...args], { from: "user" });
  return sim.opts() as SimOptions;
}

describe("prefixmesh sim — engine and node fault flags, drawn schedules, the daemon's config", () => {
  it("parses slow engines, engine failures and pauses, rejecting bad ones", () => {
    const { config } = parseSimOptions({
      ...defaults,
      engineFail: "0.02",
      slowEngine: ["1x3", "2x1.5@100:200", "n3x2@50:"],
      pause: ["0@10:20"],
      reorder: "0.1",
      reorderMaxMs: "40",
    });
    expect(config.faults).toEqual({
      network: { reorderProb: 0.1, reorderMaxMs: 40 },
      engine: {
        failProb: 0.02,
        slowdowns: [
          { node: 1, factor: 3 },
          { node: 2, factor: 1.5, atMs: 100, untilMs: 200 },
          { node: 3, factor: 2, atMs: 50 },
        ],
      },
      node: { pauses: [{ node: 0, atMs: 10, untilMs: 20 }] },
    });
    const bad: [Partial<SimOptions>, RegExp][] = [
      [{ engineFail: "1.5" }, /--engine-fail must be ≤ 1/],
      [{ slowEngine: ["1*3"] }, /--slow-engine must look like NODExFACTOR/],
      [{ slowEngine: ["7x3"] }, /--slow-engine node 7 does not exist/],
      [{ slowEngine: ["1x0"] }, /factor must be in \[1, 1000\]/],
      // Below 1 the engine would run faster, under a flag that says slow.
      [{ slowEngine: ["1x0.5"] }, /--slow-engine factor must be in \[1, 1000\] \(1x2: twice as slow\)/],
      [{ slowEngine: ["1x2@9:3"] }, /--slow-engine must end after it starts/],
      [{ pause: ["1@5"] }, /--pause must look like NODE@MS:UNTIL_MS/],
      [{ pause: ["5@1:2"] }, /--pause node 5 does not exist/],
      [{ pause: ["1@5:5"] }, /--pause must end after it starts/],
      [{ reorderMaxMs: "-1" }, /--reorder-max-ms/],
      [{ randomFaults: "0" }, /--random-faults must be ≥ 1/],
      [{ randomFaults: "1000", crash: ["1@5"] }, /--random-faults draws every fault; drop --crash/],
    ];
    for (const [o, re] of bad) expect(usageError(o).message, JSON.stringify(o)).toMatch(re);
  });

  it("parses --slow-node, --stall and --refuse (as a user types them), rejecting bad ones", () => {
    const o = optionsOf(["--slow-node", "1:10", "n2:3", "--stall", "3", "--refuse", "0@100:200"]);
    const { config } = parseSimOptions({ ...defaults, ...o });
    expect(config.faults).toEqual({
      engine: {
        slowdowns: [
          { node: 1, factor: 10 },
          { node: 2, factor: 3 },
        ],
      },
      node: { stalls: [{ node: 3 }], refuses: [{ node: 0, atMs: 100, untilMs: 200 }] },
    });
    // The printed schedule replays them (--slow-node as --slow-engine).
    const replayed = parseSimOptions({ ...defaults, ...optionsOf(faultFlags(config.faults)) }).config.faults;
    expect(replayed).toEqual(config.faults);
    expect(faultFlags(config.faults)).toContain("--stall");
    const bad: [Partial<SimOptions>, RegExp][] = [
      [{ slowNode: ["1x10"] }, /--slow-node must look like NODE:FACTOR/],
      [{ slowNode: ["9:2"] }, /--slow-node node 9 does not exist/],
      [{ slowNode: ["1:0"] }, /--slow-node factor must be in \[1, 1000\]/],
      [{ slowNode: ["1:0.5"] }, /--slow-node factor must be in \[1, 1000\]/],
      [{ stall: ["a"] }, /--stall must look like NODE/],
      [{ refuse: ["1@5:5"] }, /--refuse must end after it starts/],
      [{ refuse: ["8"] }, /--refuse node 8 does not exist/],
      [{ randomFaults: "1000", stall: ["1"] }, /--random-faults draws every fault; drop --stall/],
    ];
    for (const [b, re] of bad)
      expect(() => parseSimOptions({ ...defaults, ...b }), JSON.stringify(b)).toThrow(re);
  });

  it("parses --unauthenticated and replays it from the printed schedule, rejecting bad ones", () => {
    const o = optionsOf(["--unauthenticated", "5", "n2", "--gossip", "scuttlebutt"]);
    const { config } = parseSimOptions({ ...defaults, ...o, nodes: "6" });
    expect(config.faults).toEqual({ node: { unauthenticated: [5, 2] } });
    const flags = faultFlags(config.faults);
    expect(flags).toEqual(["--unauthenticated", "5", "2"]);
    expect(parseSimOptions({ ...defaults, ...optionsOf(flags), nodes: "6" }).config.faults).toEqual(
      config.faults,
    );
    expect(() => parseSimOptions({ ...defaults, nodes: "6", unauthenticated: ["6"] })).toThrow(
      /--unauthenticated must be ≤ 5/,
    );
  });

  it("parses --lie and --unbounded, replays them from the printed schedule, rejecting bad ones", () => {
    const o = optionsOf(["--lie", "3", "n1@10:20", "--unbounded", "7:32000"]);
    const { config } = parseSimOptions({ ...defaults, ...o });
    expect(config.faults).toEqual({
      node: { lies: [{ node: 3 }, { node: 1, atMs: 10, untilMs: 20 }] },
      client: { unbounded: [{ request: 7, maxTokens: 32_000 }] },
    });
    const replayed = parseSimOptions({ ...defaults, ...optionsOf(faultFlags(config.faults)) }).config.faults;
    expect(replayed).toEqual(config.faults);
    const bad: [Partial<SimOptions>, RegExp][] = [
      [{ lie: ["x"] }, /--lie must look like NODE/],
      [{ lie: ["9"] }, /--lie node 9 does not exist/],
      [{ unbounded: ["7"] }, /--unbounded must look like REQUEST:TOKENS/],
      [{ unbounded: ["7:0"] }, /--unbounded tokens must be in/],
      [{ randomFaults: "1000", lie: ["1"] }, /--random-faults draws every fault; drop --lie/],
    ];
    for (const [b, re] of bad)
      expect(() => parseSimOptions({ ...defaults, ...b }), JSON.stringify(b)).toThrow(re);
  });

  it("parses --abandon beside --unbounded and replays it from the printed schedule, rejecting bad ones", () => {
    const o = optionsOf(["--abandon", "4:250", "9:0", "--unbounded", "7:32000"]);
    const { config } = parseSimOptions({ ...defaults, ...o });
    expect(config.faults).toEqual({
      client: {
        unbounded: [{ request: 7, maxTokens: 32_000 }],
        abandon: [
          { request: 4, afterMs: 250 },
          { request: 9, afterMs: 0 },
        ],
      },
    });
    const replayed = parseSimOptions({ ...defaults, ...optionsOf(faultFlags(config.faults)) }).config.faults;
    expect(replayed).toEqual(config.faults);
    expect(() => parseSimOptions({ ...defaults, abandon: ["4"] })).toThrow(
      /--abandon must look like REQUEST:MS/,
    );
  });

  it("--random-faults draws the seed's schedule, and the printed flags replay it exactly", () => {
    for (const seed of [1, 2, 3, 17, 99, 1234]) {
      const drawn = parseSimOptions({ ...defaults, seed: String(seed), randomFaults: "20000" }).config.faults;
      expect(drawn).toEqual(faultScheduleFor(seed, 4, 20_000));
      const replayed = parseSimOptions({ ...optionsOf(faultFlags(drawn)), seed: String(seed) }).config.faults;
      expect(replayed).toEqual(drawn);
    }
  });

  it("--daemon-config runs the daemon's node configuration and says so", async () => {
    expect(parseSimOptions(defaults).config.daemonConfig).toBeUndefined();
    const out = sink();
    const err = quietErr();
    const r = await runSimCommand(
      { ...defaults, requests: "200", daemonConfig: true, randomFaults: "30000", seed: "3" },
      { out: out.stream, err },
    );
    expect(r.config.daemonConfig).toBe(true);
    expect(r.totals.probes).toBe(0);
    expect(r.totals.answered + r.totals.failed).toBe(200);
    expect(out.text()).toContain(`forwardAckTimeoutMs ${DAEMON_NODE_DEFAULTS.forwardAckTimeoutMs}`);
    expect(out.text()).toContain(`schedule   ${faultFlags(r.config.faults).join(" ")}`);
  });

  it("--daemon-config prints object-valued node settings as JSON, not [object Object]", async () => {
    const out = sink();
    await runSimCommand(
      {
        ...defaults,
        policy: "cost-aware",
        requests: "5",
        daemonConfig: true,
        nodeConfig: '{"policyConfig":{"peerSpeed":true},"costPrior":{"prefillFixedMs":15}}',
      },
      { out: out.stream, err: quietErr() },
    );
    expect(out.text()).not.toContain("[object Object]");
    expect(out.text()).toContain('policyConfig {"peerSpeed":true}');
    expect(out.text()).toContain('costPrior {"prefillFixedMs":15}');
  });
});
