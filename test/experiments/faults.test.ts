/**
 * `prefixmesh experiment faults --quick`: every fault class runs closed and open loop on a small
 * synthetic workload; the report has its sections, every class's row and target, and no run loses a
 * request or answers one twice (only the lying peer's class may deliver wrong answers).
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CliError } from "../../src/cli/errors.js";
import { registerExperiment } from "../../src/cli/experiment.js";
import { QUICK_REQUESTS } from "../../src/cli/experiment-faults.js";
import { FAULT_CLASSES, INVESTIGATIONS } from "../../src/experiments/faults/classes.js";
import { writeFaultsReport } from "../../src/experiments/faults/report.js";
import { type FaultsOutcome, runFaults } from "../../src/experiments/faults/run.js";

let out: string;
let o: FaultsOutcome;
beforeAll(async () => {
  out = await mkdtemp(join(tmpdir(), "pm-faults-"));
  o = await runFaults({
    source: { kind: "synthetic", scale: 0.05 },
    seed: 1,
    requests: QUICK_REQUESTS,
    openRate: 6,
  });
}, 240_000);
afterAll(() => rm(out, { recursive: true, force: true }));

describe("experiment faults --quick", () => {
  it("runs every class closed and open loop: nothing lost or answered twice, wrong only from the liar", () => {
    // Per loop: the fault-free runs (4 and 3 nodes) and every class; investigations in the open loop.
    expect(o.runs).toHaveLength(2 * (2 + FAULT_CLASSES.length) + INVESTIGATIONS.length);
    for (const loop of ["closed", "open"] as const)
      for (const c of ["fault-free", "fault-free-3", ...FAULT_CLASSES.map((x) => x.id)])
        expect(
          o.runs.some((r) => r.classId === c && r.loop === loop),
          `${c} ${loop}`,
        ).toBe(true);
    for (const r of o.runs) {
      expect(r.requests, r.id).toBe(QUICK_REQUESTS);
      expect(r.lost, r.id).toBe(0);
      expect(r.duplicated, r.id).toBe(0);
      if (r.classId !== "lying-peer") expect(r.wrong, r.id).toBe(0);
      expect(r.p50S).toBeLessThanOrEqual(r.p99S);
      expect(r.p99S).toBeLessThanOrEqual(r.maxS);
    }
    // The faults bit: the transient ones end and are measured; the misbehaving peer is seen.
    const crash = o.runs.find((r) => r.classId === "crash-restart" && r.loop === "open");
    expect(crash?.faultEndS).toBeGreaterThan(crash?.faultStartS ?? Number.POSITIVE_INFINITY);
    expect(crash?.convergeS).toBeGreaterThanOrEqual(0);
    const stall = o.runs.find((r) => r.classId === "stalling-peer" && r.loop === "closed");
    expect(stall?.trust?.length).toBe(3);
    expect(stall?.fallbacks).toBeGreaterThan(0);
    const ub = o.runs.find((r) => r.classId === "unbounded" && r.loop === "open");
    expect(ub?.unbounded?.latencyS).toBeGreaterThan(100); // ~32k tokens decoded at 5 ms each
  });

  it("writes report.md with the invariants, the targets and every class beside the fault-free run", async () => {
    const path = await writeFaultsReport(o, { command: "test", loadBefore: 0, loadAfter: 0, cores: 2 }, out);
    const md = await readFile(path, "utf8");
    for (const h of ["## Setup", "## Invariants", "## Targets (issue 18)", "## Closed loop", "## Open loop"])
      expect(md).toContain(h);
    expect(md).toContain("| lost = 0 (every request answered) | 0 lost of");
    expect(md).toContain("| duplicated = 0 (no client answered twice) | 0 |");
    for (const t of [
      "Stalling peer demoted",
      "Refusing peer",
      "Wrong-answer peer",
      "unbounded request",
      "10× slower",
      "30% loss",
    ])
      expect(md).toContain(t);
    // Each loop's table: a row per class (and the two fault-free runs).
    for (const section of md
      .split("## ")
      .filter((s) => s.startsWith("Closed loop") || s.startsWith("Open loop"))) {
      const rows = section.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| class"));
      expect(rows).toHaveLength(2 + FAULT_CLASSES.length);
      for (const row of rows) expect(row.split("|")[3]?.trim()).toBe("0"); // lost
    }
    expect(md).not.toContain("NaN");
    const json = JSON.parse(await readFile(join(out, "results.json"), "utf8"));
    expect(json.runs).toHaveLength(o.runs.length);
  });

  it("explains a missed 30% loss bound by the daemon's answer recovery and timeout cap", async () => {
    // The same outcome with the closed loop's 30% loss run made to miss its bound.
    const runs = o.runs.map((r) =>
      r.classId === "loss-30" && r.loop === "closed" ? { ...r, maxS: 1_000 } : r,
    );
    const dir = join(out, "missed");
    const path = await writeFaultsReport(
      { ...o, runs },
      { command: "test", loadBefore: 0, loadAfter: 0, cores: 2 },
      dir,
    );
    const md = await readFile(path, "utf8");
    const cause = md.split("\n").find((l) => l.startsWith("- **30% loss.**"));
    expect(cause).toContain("Answer recovery is on");
    expect(cause).toContain("after 2 timed-out waits");
    expect(cause).not.toContain("answer probes and answer recovery off");
  });

  it("refuses a missing MMLU folder with a clear message", async () => {
    const program = new Command("prefixmesh").exitOverride();
    registerExperiment(program);
    await expect(
      program.parseAsync(["experiment", "faults", "--mmlu-dir", join(out, "nope"), "--quick"], {
        from: "user",
      }),
    ).rejects.toBeInstanceOf(CliError);
  });
});
