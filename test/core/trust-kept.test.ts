/**
 * Peer trust (trust.ts): what it keeps — a quarantine, and a peer's record while it is out of the
 * membership or restarted.
 */
import { describe, expect, it } from "vitest";
import { MAX_DEPARTED, MAX_QUARANTINED } from "../../src/core/node/trust.js";
import { newTrust as fresh } from "./trust-fixture.js";

describe("trust: quarantine (a spot check caught a wrong answer)", () => {
  it("is never routable again, whatever it answers later", () => {
    const t = fresh();
    t.quarantine("b");
    expect(t.view("b")).toMatchObject({ state: "quarantined", score: 0 });
    t.answered("b", "x");
    t.sent("b", "x", 1e9);
    t.failed("b", "x", 1e9);
    expect(t.view("b")?.state).toBe("quarantined");
    expect(t.routable("b", 1e12)).toBe(false);
    expect(t.routable("c", 0)).toBe(true);
  });

  // A member declared dead that refutes it, one that leaves and rejoins, one DNS drops and lists
  // again: each is removed, then added back (mesh.ts, node.ts). Its wrong answers are not undone.
  it("holds across the peer leaving the membership and coming back; only our restart ends it", () => {
    const t = fresh();
    t.quarantine("b");
    t.remove("b", 0);
    t.add("b");
    expect(t.view("b")?.state).toBe("quarantined");
    expect(t.quarantined("b")).toBe(true);
    expect(t.routable("b", 1e12)).toBe(false);
    t.add("c"); // re-adding a present, trusted peer changes nothing of it
    expect(t.view("c")?.state).toBe("closed");
    t.reset(["b", "c"]);
    expect(t.view("b")?.state).toBe("closed");
  });

  // A check is judged when our queue empties: the peer it caught may have left the membership by then.
  it("holds for a peer caught while out of the membership, once it comes back", () => {
    const t = fresh();
    t.remove("b", 0);
    t.quarantine("b");
    expect(t.view("b")).toBeUndefined();
    t.add("b");
    expect(t.view("b")).toMatchObject({ state: "quarantined", score: 0 });
    expect(t.routable("b", 1e12)).toBe(false);
  });

  it("remembers at most MAX_QUARANTINED absent peers, the newest caught", () => {
    const t = fresh();
    for (let i = 0; i <= MAX_QUARANTINED; i++) {
      t.add(`p${i}`);
      t.quarantine(`p${i}`);
      t.remove(`p${i}`, 0);
    }
    t.add("p0");
    expect(t.view("p0")?.state).toBe("closed");
    t.add(`p${MAX_QUARANTINED}`);
    expect(t.view(`p${MAX_QUARANTINED}`)?.state).toBe("quarantined");
  });
});

// A member declared dead that refutes it (the same process) is removed, then added back (mesh.ts):
// were its record dropped, a staller slow to answer pings would come back with a clean breaker.
describe("trust: kept while a peer is out of the membership", () => {
  it("an open breaker, its doubled period and the failure history survive a refuted death", () => {
    const t = fresh();
    for (let i = 0; i < 3; i++) t.failed("b", `f${i}`, 0);
    t.sent("b", "probe", 10_000);
    t.failed("b", "probe", 10_000); // reopened for twice as long
    const before = t.view("b");
    t.remove("b", 0);
    expect(t.view("b")).toBeUndefined();
    t.add("b");
    expect(t.view("b")).toEqual(before);
    expect(t.routable("b", 29_999)).toBe(false);
    expect(t.routable("b", 30_000)).toBe(true);
    // Its next failed probe doubles the period again: the history goes on.
    t.sent("b", "probe2", 30_000);
    t.failed("b", "probe2", 30_000);
    expect(t.routable("b", 30_000 + 39_999)).toBe(false);
  });

  it("its probation goes on, bar the attempts that were open when it left (failed over as lost)", () => {
    const t = fresh();
    t.sent("b", "1", 0);
    t.failed("b", "1", 0);
    t.sent("b", "2", 0);
    t.sent("b", "3", 0);
    expect(t.mayHold("b")).toBe(false);
    t.remove("b", 0);
    t.ended("b", "2"); // its attempts end after it went: nothing to end any more
    t.add("b");
    // The failed one still counts (no answer since), the open ones do not.
    t.sent("b", "4", 0);
    expect(t.mayHold("b")).toBe(true);
    t.sent("b", "5", 0);
    expect(t.mayHold("b")).toBe(false);
    t.answered("b", "4");
    expect(t.mayHold("b")).toBe(true);
  });

  it("a closed breaker's recent failures count on: one more opens it", () => {
    const t = fresh();
    t.failed("b", "x", 0);
    t.failed("b", "x", 1);
    t.remove("b", 0);
    t.add("b");
    t.failed("b", "x", 2);
    expect(t.view("b")).toMatchObject({ state: "open", failures: 3, opened: 1 });
  });

  it("a restart claim (`restarted`) keeps the breaker, score and history; it clears only its back-off and proof", () => {
    const t = fresh();
    for (let i = 0; i < 3; i++) t.failed("b", "x", 0);
    const before = t.view("b");
    t.remove("b", 0);
    t.add("b");
    t.restarted("b");
    // Epochs are self-reported: claiming one sheds no distrust.
    expect(t.view("b")).toEqual(before);
    expect(t.routable("b", 9_999)).toBe(false);
    t.quarantine("c");
    t.restarted("c");
    expect(t.view("c")?.state).toBe("quarantined");
    // Told while out of the membership: the same when it comes back.
    t.remove("b", 0);
    t.restarted("b");
    t.add("b");
    expect(t.view("b")).toEqual(before);
  });

  it("a restart ends a back-off for load (its queue went) and the old process's proof", () => {
    const t = fresh();
    t.refused("b", 0);
    expect(t.routable("b", 1)).toBe(false);
    t.sent("b", "1", 0);
    t.answered("b", "1"); // proven: no probation
    for (let i = 2; i <= 5; i++) t.sent("b", `${i}`, 0);
    expect(t.mayHold("b")).toBe(true);
    t.restarted("b");
    expect(t.routable("b", 1)).toBe(true);
    for (let i = 2; i <= 5; i++) t.ended("b", `${i}`); // failed over as lost
    for (let i = 6; i <= 8; i++) t.sent("b", `${i}`, 1);
    expect(t.mayHold("b")).toBe(false); // on probation again: the new process answered nothing yet
  });

  it("a restart starts probation over: the old process's failures leave its count, not its streak", () => {
    // More failures open the breaker than probation allows unanswered: the old process's failed
    // attempts alone would hold the new one back from every forward, for ever.
    const t = fresh({ failures: 5 });
    t.sent("b", "0", 0);
    t.answered("b", "0");
    for (let i = 1; i <= 3; i++) {
      t.sent("b", `${i}`, 0);
      t.failed("b", `${i}`, 0);
      t.ended("b", `${i}`);
    }
    expect(t.view("b")?.state).toBe("closed");
    t.restarted("b");
    expect(t.mayHold("b")).toBe(true);
    // Its streak stands: two more failures of the new process open the breaker.
    for (let i = 4; i <= 5; i++) {
      t.sent("b", `${i}`, 1);
      t.failed("b", `${i}`, 1);
      t.ended("b", `${i}`);
    }
    expect(t.view("b")).toMatchObject({ state: "open", failures: 5, opened: 1 });
  });

  it("an honest peer restarted while demoted recovers full trust: its open period, one probe, closed", () => {
    const t = fresh();
    for (let i = 1; i <= 3; i++) {
      t.sent("b", `${i}`, 0);
      t.failed("b", `${i}`, 0);
      t.ended("b", `${i}`);
    }
    t.restarted("b");
    expect(t.routable("b", 9_999)).toBe(false);
    expect(t.routable("b", 10_000)).toBe(true);
    expect(t.mayHold("b")).toBe(true);
    t.sent("b", "probe", 10_000);
    expect(t.view("b")?.state).toBe("half-open");
    t.answered("b", "probe");
    expect(t.view("b")?.state).toBe("closed");
    // Proven by that answer: off probation, its forwards unbounded again.
    for (let i = 0; i < 5; i++) t.sent("b", `n${i}`, 10_001);
    expect(t.mayHold("b")).toBe(true);
    expect(t.routable("b", 10_001)).toBe(true);
  });

  it("shows the kept records, the last gone first and bounded, a quarantine caught while out included", () => {
    const t = fresh();
    for (let i = 0; i < 3; i++) t.failed("b", "x", 0);
    t.remove("b", 1_000);
    t.remove("c", 2_000);
    t.quarantine("c"); // caught while out: quarantined on its return
    expect(t.departedViews(5_000, 10)).toEqual({
      total: 2,
      peers: [
        {
          id: "c",
          trust: { score: 0, state: "quarantined", failures: 0, late: 0, refusals: 0, opened: 0 },
          goneForMs: 3_000,
        },
        {
          id: "b",
          trust: expect.objectContaining({ state: "open", failures: 3, opened: 1 }),
          goneForMs: 4_000,
        },
      ],
    });
    expect(t.departedViews(5_000, 1).peers.map((p) => p.id)).toEqual(["c"]);
    t.add("b");
    expect(t.departedViews(5_000, 10).total).toBe(1);
  });

  it("remembers at most MAX_DEPARTED absent peers, the last gone; our restart forgets them", () => {
    const t = fresh();
    for (let i = 0; i <= MAX_DEPARTED; i++) {
      t.add(`p${i}`);
      for (let k = 0; k < 3; k++) t.failed(`p${i}`, "x", 0);
      t.remove(`p${i}`, 0);
    }
    t.add("p0");
    expect(t.view("p0")?.state).toBe("closed");
    t.add(`p${MAX_DEPARTED}`);
    expect(t.view(`p${MAX_DEPARTED}`)?.state).toBe("open");
    for (let k = 0; k < 3; k++) t.failed("b", "x", 0);
    t.remove("b", 0);
    t.reset(["c"]);
    t.add("b");
    expect(t.view("b")?.state).toBe("closed");
  });
});
