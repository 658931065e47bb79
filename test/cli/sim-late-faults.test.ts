/** `prefixmesh sim` with faults scheduled after the workload is done: the run stops, and says so. */
import { describe, expect, it } from "vitest";
import { runSimCommand } from "../../src/cli/sim.js";
import { SIM_DEFAULTS as defaults, quietErr, sink } from "../sim/sim-cli-fixture.js";

describe("sim with a fault scheduled far past the last answer", () => {
  it("stops at the last answer and names the faults that never began, not at the safety stop", async () => {
    const out = sink();
    const r = await runSimCommand(
      {
        ...defaults,
        requests: "20",
        crash: ["1@100000000", "2@1000:200000000"],
        pause: ["3@90000000:91000000"],
      },
      { out: out.stream, err: quietErr() },
    );
    expect(r.totals.answered).toBe(20);
    const never = r.faultsNeverBegun;
    expect(never?.faults).toEqual([
      "--crash 1@100000000",
      "the restart of --crash 2@1000:200000000 (n2 stays down)",
      "--pause 3@90000000:91000000",
    ]);
    // Node 2's crash began during the workload and counts; the run ends with the workload.
    expect(r.perNode.map((n) => n.crashes)).toEqual([0, 0, 1, 0]);
    expect(r.virtualMs).toBe(never?.afterMs);
    expect(out.text()).toMatch(
      /never {6}the workload was done at [\d.]+ s virtual, before --crash 1@100000000/,
    );
  });

  it("names a misbehaviour or slowdown whose window opens after the stop, not one already open", async () => {
    const r = await runSimCommand(
      {
        ...defaults,
        requests: "20",
        stall: ["0@100000000:200000000"],
        refuse: ["2@0:1000"],
        slowEngine: ["3x2@100000000:200000000"],
      },
      { out: sink().stream, err: quietErr() },
    );
    expect(r.totals.answered).toBe(20);
    expect(r.faultsNeverBegun?.faults).toEqual([
      "--stall 0@100000000:200000000",
      "--slow-engine 3x2@100000000:200000000",
    ]);
  });

  it("does not hold the stop for link faults that last past the workload", async () => {
    const r = await runSimCommand(
      { ...defaults, requests: "20", loss: "0.01", faultsUntilMs: "1000000000" },
      { out: sink().stream, err: quietErr() },
    );
    expect(r.totals.answered).toBe(20);
    expect(r.virtualMs).toBeLessThan(600_000);
  });

  it("still runs a fault that begins before the last answer", async () => {
    const r = await runSimCommand(
      { ...defaults, requests: "20", crash: ["1@1000:3000"] },
      { out: sink().stream, err: quietErr() },
    );
    expect(r.faultsNeverBegun).toBeUndefined();
    expect(r.perNode[1]?.crashes).toBe(1);
  });
});
