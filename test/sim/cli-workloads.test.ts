/** `prefixmesh sim --workload …-zipf / …-chat`: parameters checked with clear errors, and full runs. */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { CliError } from "../../src/cli/errors.js";
import { parseSimOptions, runSimCommand, type SimOptions } from "../../src/cli/sim.js";
import { DEFAULT_PROFILE } from "../../src/engines/sim/profiles.js";

const MMLU_DIR = resolve(__dirname, "../../../shared/datasets/mmlu");
const haveMmlu = existsSync(join(MMLU_DIR, "test"));
if (!haveMmlu)
  console.warn(`[skip] real-MMLU sim CLI runs: ${MMLU_DIR} is absent (the shared dataset folder)`);

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

const quietErr = () => Object.assign(sink().stream, { isTTY: false }) as unknown as NodeJS.WriteStream;

function usageError(o: Partial<SimOptions>): CliError {
  let caught: unknown;
  try {
    parseSimOptions({ ...defaults, ...o });
  } catch (err) {
    caught = err;
  }
  expect(caught, JSON.stringify(o)).toBeInstanceOf(CliError);
  expect((caught as CliError).exitCode).toBe(2);
  return caught as CliError;
}

describe("prefixmesh sim --workload *-zipf", () => {
  it("parses the exponent and --no-repeats", () => {
    const a = parseSimOptions({ ...defaults, workload: "synthetic-zipf", zipfS: "1.1" });
    expect(a.workload).toEqual({ name: "synthetic-zipf", skew: { kind: "zipf", s: 1.1, repeats: true } });
    const b = parseSimOptions({ ...defaults, workload: "mmlu-zipf", repeats: false });
    expect(b.workload.skew).toEqual({ kind: "zipf", s: 1, repeats: false });
    expect(parseSimOptions({ ...defaults, workload: "mmlu-skewed", repeats: false }).workload.skew).toEqual({
      kind: "hot-set",
      repeats: false,
    });
  });

  it("rejects bad exponents and flags the workload cannot use", () => {
    const bad: [Partial<SimOptions>, RegExp][] = [
      [{ workload: "synthetic-zipf", zipfS: "0" }, /--zipf-s must be > 0, got 0/],
      [{ workload: "synthetic-zipf", zipfS: "-1" }, /--zipf-s must be ≥ 0/],
      [{ workload: "synthetic-zipf", zipfS: "11" }, /--zipf-s must be ≤ 10/],
      [{ workload: "synthetic-zipf", zipfS: "steep" }, /--zipf-s must be a number/],
      [{ workload: "synthetic", zipfS: "1.1" }, /--zipf-s applies only to the Zipf workloads/],
      [{ workload: "mmlu-skewed", zipfS: "1.1" }, /--zipf-s applies only/],
      [{ workload: "mmlu", repeats: false }, /--no-repeats applies only to the skewed and Zipf/],
    ];
    for (const [o, re] of bad) expect(usageError(o).message, JSON.stringify(o)).toMatch(re);
  });

  it("runs end to end on the synthetic pool and names the schedule", async () => {
    const out = sink();
    const r = await runSimCommand(
      { ...defaults, workload: "synthetic-zipf", zipfS: "1.1", requests: "300" },
      { out: out.stream, err: quietErr() },
    );
    expect(r.totals.answered).toBe(300);
    expect(r.totals.incorrect).toBe(0);
    expect(out.text()).toMatch(/workload synthetic-zipf \(zipf\(s=1\.1\) with repeats\): 300 requests/);
  });

  it("a schedule the pool cannot hold is a usage error, not a crash", async () => {
    await expect(
      runSimCommand(
        { ...defaults, workload: "synthetic-zipf", repeats: false, requests: "20000" },
        { out: sink().stream, err: quietErr() },
      ),
    ).rejects.toThrow(/--workload synthetic-zipf: only 14042 distinct items exist/);
  });

  it.skipIf(!haveMmlu)("runs on real MMLU (mmlu-zipf --zipf-s 1.1)", async () => {
    const out = sink();
    const r = await runSimCommand(
      { ...defaults, workload: "mmlu-zipf", zipfS: "1.1", mmluDir: MMLU_DIR, requests: "300" },
      { out: out.stream, err: quietErr() },
    );
    expect(r.totals.answered).toBe(300);
    expect(r.workload.synthetic).toBe(false);
    expect(out.text()).toMatch(/workload mmlu-zipf \(zipf\(s=1\.1\) with repeats\)/);
  });
});
