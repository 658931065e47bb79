import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { requireBuild } from "../e2e/helpers.js";

const run = (...args: string[]) =>
  spawnSync(process.execPath, [requireBuild(), ...args], { encoding: "utf8", timeout: 30_000 });

describe("a mistyped command line", () => {
  it("says what is wrong in a few lines, not above the whole help, and exits 2", () => {
    for (const [args, said] of [
      [
        ["node", "--id", "A", "--listne", "127.0.0.1:8080"],
        /unknown option '--listne'\n\(Did you mean --listen\?\)/,
      ],
      [["node", "--id", "A", "--listen"], /option '--listen <host:port>' argument missing/],
      [["bench", "--requests", "3"], /required option '--url <urls>' not specified/],
      [["nodes"], /unknown command 'nodes'/],
    ] as const) {
      const r = run(...args);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stderr).toMatch(said);
      expect(r.stderr).toContain("(add --help to see the options)");
      expect(r.stderr.trim().split("\n").length, r.stderr).toBeLessThanOrEqual(4);
      expect(r.stdout).toBe("");
    }
  });
});

describe("bench's workload flags", () => {
  it("has no --think-ms: bench runs closed loops only, and the flag could never apply", () => {
    const help = run("bench", "--help");
    expect(help.status).toBe(0);
    expect(help.stdout).toContain("--chat-active");
    expect(help.stdout).not.toContain("--think-ms");
    const r = run("bench", "--url", "http://127.0.0.1:9", "--workload", "synthetic-chat", "--think-ms", "5");
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/unknown option '--think-ms'/);
    // sim keeps it: its open loop (--rate) uses it.
    expect(run("sim", "--help").stdout).toContain("--think-ms");
  });
});

describe("a simulation config the simulator refuses", () => {
  it("is told in one line with exit 2, not as a crash with a stack", () => {
    const r = run("sim", "--nodes", "6", "--requests", "5", "--gossip", "full", "--unauthenticated", "5");
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/invalid simulation config: unauthenticated nodes need gossip "scuttlebutt"/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.stdout).toBe("");
  });
});

describe("SWIM settings in --node-config that contradict each other", () => {
  it("are told in one line with exit 2, by sim and by experiment faults --set", () => {
    const swim = '{"probeIntervalMs":1000,"probeTimeoutMs":5000}';
    for (const args of [
      ["sim", "--requests", "5", "--gossip", "scuttlebutt", "--node-config", `{"swim":${swim}}`],
      ["experiment", "faults", "--synthetic", "--quick", "--loops", "closed", "--set", `swim=${swim}`],
    ]) {
      const r = run(...args);
      expect(r.status, `${args.join(" ")}\n${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(/probeTimeoutMs must not exceed probeIntervalMs/);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(r.stdout).toBe("");
    }
  });
});

describe("--mmlu-dir with a synthetic workload", () => {
  it("is refused by sim and bench (it would read nothing), with exit 2", () => {
    for (const args of [
      ["sim", "--requests", "3", "--mmlu-dir", "/data/mmlu"],
      ["bench", "--url", "http://127.0.0.1:9", "--workload", "synthetic-chat", "--mmlu-dir", "/data/mmlu"],
    ]) {
      const r = run(...args);
      expect(r.status, `${args.join(" ")}\n${r.stderr}`).toBe(2);
      expect(r.stderr).toMatch(/--mmlu-dir applies only to the mmlu\* workloads/);
      expect(r.stdout).toBe("");
    }
  });
});

describe("experiment scale's --max-nodes beside --nodes", () => {
  it("is refused with exit 2: --nodes lists every N, so the bound would be unused", () => {
    const r = run(
      "experiment",
      "scale",
      "--quick",
      "--nodes",
      "4",
      "--max-nodes",
      "16",
      "--out",
      join(tmpdir(), "pm-none"),
    );
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/--max-nodes and --nodes: give one of them/);
  });
});

describe("experiment faults' --rate with the closed loop only", () => {
  it("is refused with exit 2: the rate paces the open loop, which would not run", () => {
    const out = join(tmpdir(), "pm-none");
    const r = run(
      "experiment",
      "faults",
      "--synthetic",
      "--quick",
      "--loops",
      "closed",
      "--rate",
      "3",
      "--out",
      out,
    );
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/--rate applies only to the open loop/);
  });
});
