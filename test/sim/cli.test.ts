/** `prefixmesh sim`: flag validation and the printed summary (in-process, synthetic workload). */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { CliError } from "../../src/cli/errors.js";
import { parseSimOptions, runSimCommand, type SimOptions } from "../../src/cli/sim.js";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";

const defaults: SimOptions = {
  nodes: "4",
  policy: "affinity",
  commMs: "2",
  jitterMs: "0.5",
  pollMs: "500",
  workload: "synthetic",
  seed: "1",
  profile: DEFAULT_PROFILE,
};

function sink(): { stream: Writable; text: () => string } {
  let buf = "";
  const stream = new Writable({
    write(chunk, _enc, cb) {
      buf += String(chunk);
      cb();
    },
  });
  return { stream, text: () => buf };
}

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
    ];
    for (const [o, re] of bad) {
      let caught: unknown;
      try {
        parseSimOptions({ ...defaults, ...o });
      } catch (err) {
        caught = err;
      }
      expect(caught, JSON.stringify(o)).toBeInstanceOf(CliError);
      expect((caught as CliError).exitCode).toBe(2);
      expect((caught as CliError).message).toMatch(re);
    }
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
    const err = Object.assign(sink().stream, { isTTY: false }) as unknown as NodeJS.WriteStream;
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
    const err = Object.assign(sink().stream, { isTTY: false }) as unknown as NodeJS.WriteStream;
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
    const err = Object.assign(sink().stream, { isTTY: false }) as unknown as NodeJS.WriteStream;
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
