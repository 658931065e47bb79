/**
 * The fault report describes the rule its run's nodes had: results.json records the daemon defaults
 * it ran with, so a run with the stalling-peer probation (trustMaxUnanswered) says so, and one from
 * before it keeps the old wording (the committed report: faults-committed-report.test.ts).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { type FaultsResults, faultsReportText } from "../../src/experiments/faults/report.js";

const committed = JSON.parse(
  readFileSync(new URL("../../docs/results/faults/results.json", import.meta.url), "utf8"),
) as FaultsResults;

/**
 * The committed results as a run that missed the stalling-peer target: every origin counted 7 failed
 * forwards before its breaker first opened in the open loop (as runs before the probation window did).
 */
const missed: FaultsResults = {
  ...committed,
  runs: committed.runs.map((r) =>
    r.classId === "stalling-peer" && r.loop === "open" && r.trust
      ? { ...r, trust: r.trust.map((t) => ({ ...t, failures: t.failures + 4, beforeFirstOpen: 7 })) }
      : r,
  ),
};

/** The stalling peer's paragraph of "Why the missed targets are missed", its lines joined. */
function stallCause(md: string): string {
  const lines = md.split("\n");
  const at = lines.findIndex((l) => l.startsWith("- **Stalling peer, demotion.**"));
  if (at < 0) return "";
  const end = lines.findIndex((l, i) => i > at && !l.startsWith("  "));
  return lines.slice(at, end).join("\n");
}

describe("fault report: the stalling peer's rule", () => {
  it("a run with the probation window describes it, in the setup and where the target is missed", () => {
    const withWindow = {
      ...missed,
      daemonDefaults: { ...missed.daemonDefaults, trustMaxUnanswered: 3 },
    };
    const md = faultsReportText(withWindow);
    expect(md).toContain("trustMaxUnanswered 3");
    expect(md).toContain("is sent at most 3 of that origin's forwards it has not answered");
    // A run that misses the target prints the cause, with the new rule.
    const cause = stallCause(md);
    expect(cause).toContain("sent it while it was off probation");
    expect(cause).not.toContain("so more than 3 go unanswered before the first failure is even counted");
  });

  it("the committed run meets the target: no cause is printed for it", () => {
    expect(stallCause(faultsReportText(committed))).toBe("");
  });

  it("a run from before it keeps the old wording", () => {
    const d = { ...missed.daemonDefaults };
    delete (d as { trustMaxUnanswered?: unknown }).trustMaxUnanswered;
    const md = faultsReportText({ ...missed, daemonDefaults: d });
    expect(md).not.toContain("trustMaxUnanswered");
    expect(stallCause(md)).toContain("so more than 3 go unanswered before the first failure is even counted");
  });
});

/** The committed results with the 30% loss runs' figures set (every run measured every queue wait). */
function lossRuns(maxS: number, maxUnqueuedS: number, otherQueueS: number | undefined): FaultsResults {
  return {
    ...committed,
    runs: committed.runs.map((r) => {
      const slowest = r.slowest && { ...r.slowest, otherQueueS };
      return r.classId === "loss-30"
        ? { ...r, maxS, maxUnqueuedS, forwardTimeouts: 0, slowest }
        : { ...r, slowest };
    }),
  };
}

const lossRow = (md: string) => md.split("\n").find((l) => l.startsWith("| 30% loss")) ?? "";

describe("fault report: the 30% loss bound, read without queue waits", () => {
  it("a max above the bound only by queue waits is not met, and says it is met without them", () => {
    const md = faultsReportText(lossRuns(20, 7, 10));
    expect(lossRow(md)).toContain("max without its queue waits (every queue it waited in) 7.000 s");
    expect(lossRow(md)).toMatch(/\| \*\*not met\*\* \(closed loop, open loop; met without queue waits\) \|$/);
    expect(md).toContain("The 30% loss target is read on the whole latency, as written");
    expect(md).toContain(
      "- **Queue waits**: a request's record counts the queue of the run that answered it",
    );
    expect(md).toContain("A second reading, not the target's: less every queue wait");
    expect(md).toContain("the longest request takes closed loop 7.000 s (within its bound");
  });

  it("above the bound without queue waits too: not met, and by how much", () => {
    const md = faultsReportText(lossRuns(20, 30, 10));
    expect(lossRow(md)).toMatch(/\| \*\*not met\*\* \(closed loop, open loop\) \|$/);
    expect(md).toMatch(/open loop 30\.000 s \(\d+\.\d{3} s above its bound/);
  });

  it("a run that measured only the answering run's queue reads the whole latency alone", () => {
    const md = faultsReportText(lossRuns(20, 7, undefined));
    expect(lossRow(md)).toMatch(/\| \*\*not met\*\* \(closed loop, open loop\) \|$/);
    expect(md).not.toContain("- **Queue waits**");
  });
});

describe("fault report: a run shorter than the measured size", () => {
  it("says at the top that its verdicts are not the measurement; the committed run does not", () => {
    expect(committed.requests).toBe(10_000);
    expect(faultsReportText(committed)).not.toContain("**A short run**");
    const md = faultsReportText({ ...committed, requests: 300 });
    const top = md.slice(0, md.indexOf("## Setup"));
    expect(top).toContain("**A short run**: 300 requests per run, where the targets are read at 10000");
    expect(top).toContain("not the issue's measurement");
    // Set off by one blank line, as the synthetic note is, not two.
    expect(top).not.toMatch(/\n\n\n/);
  });
});
