/**
 * The queue waits a request's record keeps apart from `queueMs` (queue-waits.ts): a peer's queue while
 * its origin still waited on that attempt, its origin's own queue before it moved, overlaps once.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { QueueWaits, unionMs } from "../../src/sim/queue-waits.js";
import { runSimulation } from "../../src/sim/run.js";
import { assembleWorkload } from "../../src/workload/assemble.js";
import { syntheticPool } from "../../src/workload/synthetic.js";
import { daemonSimConfig } from "./helpers.js";

describe("QueueWaits", () => {
  it("counts a peer's queue only while the origin waited on that attempt, not the answering run's", () => {
    const q = new QueueWaits();
    q.submitted("r1.1", 0);
    q.sent("r1.1", 1, 1, 0);
    q.delivered("r1.1", 1, 1, 2);
    q.sent("r1.1", 1, 1, 4_000); // a re-ask: the same attempt, no new wait
    q.delivered("r1.1", 1, 1, 4_002);
    q.ended("r1.1", 1, 10_000); // given up on, still queued at the peer
    q.sent("r1.1", 2, 2, 10_000);
    q.delivered("r1.1", 2, 2, 10_002);
    q.left("r1.1", 2, 10_500); // peer 2 starts it: 0.5 s queued, the record's queueMs
    q.left("r1.1", 2, 11_000, 2);
    expect(q.take("r1.1", 11_002, { peer: 2, attempt: 2 })).toBeCloseTo(9_998, 6);
  });

  it("counts its origin's queue before offload moved it, not the wait before its own answering run", () => {
    const q = new QueueWaits();
    q.submitted("r2.1", 0);
    q.sent("r2.1", 3, 1, 5_000); // offloaded after 5 s in the origin's queue
    q.delivered("r2.1", 3, 1, 5_002);
    q.ended("r2.1", 1, 6_002); // never acked: back at the origin
    q.ranHere("r2.1", 7_000); // 1 s queued before the run that answers (queueMs)
    expect(q.take("r2.1", 7_500)).toBeCloseTo(5_000 + 1_000, 6);
  });

  it("counts a wait once where it overlaps another, or the answering run", () => {
    const q = new QueueWaits();
    q.submitted("r3.1", 0);
    q.sent("r3.1", 2, 1, 0);
    q.delivered("r3.1", 2, 1, 2);
    q.ended("r3.1", 1, 250); // moved on; peer 2 still queues it, then runs it and answers late
    q.sent("r3.1", 1, 2, 250);
    q.delivered("r3.1", 1, 2, 252);
    q.left("r3.1", 2, 687);
    q.left("r3.1", 2, 937, 1);
    // Peer 1's wait [252, 939] lies inside peer 2's queue and run [2, 937] but for its last 2 ms.
    expect(q.take("r3.1", 939, { peer: 2, attempt: 1 })).toBeCloseTo(2, 6);
  });

  it("a hedge's re-ask of an abandoned attempt leaves the request in its origin's queue", () => {
    const q = new QueueWaits();
    q.submitted("r5.1", 0);
    q.sent("r5.1", 1, 1, 0);
    q.delivered("r5.1", 1, 1, 2);
    q.left("r5.1", 1, 500); // peer 1 runs it; its answer is lost
    q.left("r5.1", 1, 1_000, 1);
    q.ended("r5.1", 1, 3_000); // overdue: queued here, the hedge re-asks peer 1 at once and again
    q.sent("r5.1", 1, 1, 3_000);
    q.sent("r5.1", 1, 1, 4_000);
    q.delivered("r5.1", 1, 1, 4_002);
    // The kept answer takes it out of its origin's queue, where it waited from 3 s on.
    expect(q.take("r5.1", 4_004, { peer: 1, attempt: 1 })).toBeCloseTo(1_004, 6);
  });

  it("a re-ask while it waits for its own run here splits no wait: that wait is queueMs", () => {
    const q = new QueueWaits();
    q.submitted("r6.1", 0);
    q.sent("r6.1", 1, 1, 0);
    q.delivered("r6.1", 1, 1, 2);
    q.left("r6.1", 1, 500);
    q.left("r6.1", 1, 1_000, 1);
    q.ended("r6.1", 1, 3_000);
    q.sent("r6.1", 1, 1, 3_500);
    q.ranHere("r6.1", 4_000);
    // Only peer 1's queue while the origin waited on it; [3 s, 4 s] is the answering run's wait.
    expect(q.take("r6.1", 5_000)).toBeCloseTo(498, 6);
  });

  it("a peer's crash ends the wait in its queue, though its origin waits on until it notices", () => {
    const q = new QueueWaits();
    q.submitted("r7.1", 0);
    q.sent("r7.1", 1, 1, 0);
    q.delivered("r7.1", 1, 1, 2);
    q.crashed(1, [], 2_000);
    q.ended("r7.1", 1, 6_000); // its origin gives up on peer 1 only now, then runs it at once
    q.ranHere("r7.1", 6_000);
    expect(q.take("r7.1", 7_000)).toBeCloseTo(1_998, 6);
  });

  it("its own queue while a peer's answer is lost counts once: queue, unless it is the answering run", () => {
    const q = new QueueWaits();
    q.submitted("r8.1", 0);
    q.sent("r8.1", 1, 1, 0);
    q.delivered("r8.1", 1, 1, 2);
    q.left("r8.1", 1, 100); // peer 1 runs it
    q.ended("r8.1", 1, 300); // overdue: queued here from now, peer 1 still running it
    q.left("r8.1", 1, 1_000, 1); // its answer, lost on the way
    q.sent("r8.1", 1, 1, 3_000); // the hedge re-asks: peer 1 re-sends the answer it kept
    q.delivered("r8.1", 1, 1, 3_002);
    q.left("r8.1", 1, 3_002, 1);
    // Held [300, 3004]: its part within peer 1's run [100, 1000] is that run, the rest is queue.
    expect(q.take("r8.1", 3_004, { peer: 1, attempt: 1 })).toBeCloseTo(2_004, 6);
  });

  it("a peer's run is service, never a wait; a later attempt queued behind it waits", () => {
    const q = new QueueWaits();
    q.submitted("r9.1", 0);
    q.sent("r9.1", 1, 1, 0);
    q.delivered("r9.1", 1, 1, 2);
    q.left("r9.1", 1, 100); // peer 1 runs attempt 1 ...
    q.ended("r9.1", 1, 600); // ... when its origin moves on: [100, 600] is its run, not queue
    q.ranHere("r9.1", 800);
    expect(q.take("r9.1", 1_300)).toBeCloseTo(98, 6);

    q.submitted("r9.2", 0);
    q.sent("r9.2", 1, 1, 0);
    q.delivered("r9.2", 1, 1, 2, 5_000);
    q.ended("r9.2", 1, 500); // failed over early (peer 1 seemed silent); its cancel is lost
    q.sent("r9.2", 1, 2, 1_500); // offload moves it to peer 1 again
    q.delivered("r9.2", 1, 2, 1_502, 5_000);
    q.left("r9.2", 1, 2_000); // peer 1 runs attempt 1's job first; attempt 2 waits behind it
    q.ended("r9.2", 2, 2_500);
    q.ranHere("r9.2", 2_600);
    // Attempt 1 [2, 500], held [500, 1500], attempt 2 [1502, 2500]: its wait ends at its own end.
    expect(q.take("r9.2", 3_000)).toBeCloseTo(498 + 1_000 + 998, 6);
  });

  it("a peer's run is its earliest arrival still wanted: one past its deadline was dropped unrun", () => {
    const q = new QueueWaits();
    q.submitted("r12.1", 0);
    q.sent("r12.1", 1, 1, 0);
    q.delivered("r12.1", 1, 1, 2, 400); // its job there expires at 402
    q.ended("r12.1", 1, 500); // timed out; its cancel is lost: the job waits for its turn
    q.sent("r12.1", 1, 2, 1_500); // offload moves it to peer 1 again
    q.delivered("r12.1", 1, 2, 1_502, 1_000);
    q.left("r12.1", 1, 2_000); // attempt 1's turn dropped it: this run is attempt 2's
    q.ended("r12.1", 2, 2_500);
    q.ranHere("r12.1", 2_600);
    // Attempt 1 [2, 500], held [500, 1500], attempt 2 [1502, 2000]: its run is service.
    expect(q.take("r12.1", 3_000)).toBeCloseTo(498 + 1_000 + 498, 6);

    q.submitted("r12.2", 0);
    q.sent("r12.2", 1, 1, 0);
    q.delivered("r12.2", 1, 1, 2, 10_000);
    q.crashed(1, [], 100);
    q.ended("r12.2", 1, 500);
    q.sent("r12.2", 1, 2, 600);
    q.delivered("r12.2", 1, 2, 602, 10_000);
    q.delivered("r12.2", 1, 1, 700, 10_000); // a late copy of attempt 1 reaches the restarted peer
    q.left("r12.2", 1, 1_000); // by arrival: attempt 2's job, though attempt 1 is the older attempt
    q.ended("r12.2", 2, 1_200);
    q.ranHere("r12.2", 1_300);
    // Attempt 1 [2, 100], held [500, 600], attempt 2 [602, 1000].
    expect(q.take("r12.2", 1_800)).toBeCloseTo(98 + 100 + 398, 6);
  });

  it("a job past its deadline drops when a later arrival at its peer starts, whoever's it is", () => {
    const q = new QueueWaits();
    q.submitted("r13.1", 0);
    q.sent("r13.1", 1, 1, 0);
    q.delivered("r13.1", 1, 1, 10, 20); // expires at 30; nothing of r13.1 queues behind it
    q.submitted("r13.2", 0);
    q.sent("r13.2", 1, 1, 11);
    q.delivered("r13.2", 1, 1, 11);
    q.left("r13.2", 1, 50); // r13.2's turn: r13.1's job, ahead of it and past its expiry, dropped
    q.ended("r13.1", 1, 100);
    q.ranHere("r13.1", 100);
    // Its stay [10, 50] only: after the drop it queued nowhere while its origin waited on.
    expect(q.take("r13.1", 150)).toBeCloseTo(40, 6);

    // A copy the peer takes anew after the drop (its duplicate window forgot the attempt) queues anew:
    // its first stay is not the answering run's wait.
    q.submitted("r13.3", 0);
    q.sent("r13.3", 1, 1, 0);
    q.delivered("r13.3", 1, 1, 10, 20);
    q.submitted("r13.4", 0);
    q.sent("r13.4", 1, 1, 11);
    q.delivered("r13.4", 1, 1, 11);
    q.left("r13.4", 1, 50);
    q.delivered("r13.3", 1, 1, 60, 1_000); // a hedge's re-ask of the attempt
    q.left("r13.3", 1, 70);
    q.left("r13.3", 1, 80, 1);
    // [10, 50] queued; [60, 70] is the record's queueMs, [70, 80] its run.
    expect(q.take("r13.3", 90, { peer: 1, attempt: 1 })).toBeCloseTo(40, 6);
  });

  it("a run a peer repeats once its duplicate window forgot it ran the attempt is a new stay's", () => {
    const q = new QueueWaits();
    q.submitted("r14.1", 0);
    q.sent("r14.1", 1, 1, 0);
    q.delivered("r14.1", 1, 1, 10);
    q.left("r14.1", 1, 20);
    q.left("r14.1", 1, 30, 1); // its answer is lost
    q.delivered("r14.1", 1, 1, 50); // re-asked; the peer forgot the attempt: a second job
    q.left("r14.1", 1, 70);
    q.left("r14.1", 1, 80, 1);
    // [10, 20] queued, [20, 30] a run (service); [50, 70] is the record's queueMs, [70, 80] its run.
    expect(q.take("r14.1", 85, { peer: 1, attempt: 1 })).toBeCloseTo(10, 6);
  });

  it("a run read as a later stay's than the job that ran ends no earlier arrival still wanted", () => {
    const q = new QueueWaits();
    q.submitted("r15.1", 0);
    q.sent("r15.1", 1, 1, 0);
    q.delivered("r15.1", 1, 1, 0, 5);
    // A copy while its job waits, the peer's duplicate window past it: a second job, its copy here.
    q.delivered("r15.1", 1, 1, 1, 100);
    q.submitted("r15.2", 0);
    q.sent("r15.2", 1, 1, 2);
    q.delivered("r15.2", 1, 1, 2, 100); // behind the second job, wanted until 102
    q.ended("r15.1", 1, 3);
    q.sent("r15.1", 1, 2, 3);
    q.delivered("r15.1", 1, 2, 3, 100);
    // The second job runs (the first expired); read as attempt 2's, which arrived after r15.2's.
    q.left("r15.1", 1, 10);
    q.ended("r15.2", 1, 60); // r15.2's job still waited there: its turn had not come
    q.ranHere("r15.2", 60);
    // [0, 2] at its origin, [2, 60] at the peer; [60, 70] its run here.
    expect(q.take("r15.2", 70)).toBeCloseTo(60, 6);
  });

  it("a forward re-sent to a restarted peer queues there again", () => {
    const q = new QueueWaits();
    q.submitted("r10.1", 0);
    q.sent("r10.1", 1, 1, 0);
    q.delivered("r10.1", 1, 1, 2);
    q.crashed(1, [], 1_000);
    q.sent("r10.1", 1, 1, 3_000); // peer 1 is back: the attempt is re-sent to its new process
    q.delivered("r10.1", 1, 1, 3_002);
    q.left("r10.1", 1, 4_000);
    q.left("r10.1", 1, 4_500, 1);
    // Its first stay [2, 1000] is queue; its answer's wait [3002, 4000] is queueMs.
    expect(q.take("r10.1", 4_502, { peer: 1, attempt: 1 })).toBeCloseTo(998, 6);

    q.submitted("r10.2", 0);
    q.sent("r10.2", 1, 1, 0);
    q.delivered("r10.2", 1, 1, 2);
    q.crashed(1, [], 1_000);
    q.delivered("r10.2", 1, 1, 3_002);
    q.ended("r10.2", 1, 3_500); // given up on while queued at the new process
    q.ranHere("r10.2", 3_600);
    expect(q.take("r10.2", 4_000)).toBeCloseTo(998 + 498, 6);
  });

  it("an attempt answered with an error and asked again waits anew from its new delivery", () => {
    const q = new QueueWaits();
    q.submitted("r11.1", 0);
    q.sent("r11.1", 1, 1, 0);
    q.delivered("r11.1", 1, 1, 2);
    q.left("r11.1", 1, 2, 1); // refused at once; the error is lost
    q.sent("r11.1", 1, 1, 400); // its ack never came: re-sent, and taken this time
    q.delivered("r11.1", 1, 1, 402);
    q.ended("r11.1", 1, 1_500); // given up on while still queued at peer 1
    q.ranHere("r11.1", 1_500);
    expect(q.take("r11.1", 2_000)).toBeCloseTo(1_098, 6);
  });

  it("forgets a request once taken, dropped or its origin crashed", () => {
    const q = new QueueWaits();
    q.submitted("r4.1", 0);
    q.drop("r4.1");
    expect(q.take("r4.1", 1_000)).toBe(0);
    q.submitted("r4.2", 0);
    q.sent("r4.2", 1, 1, 500);
    q.crashed(2, ["r4.2"], 600);
    expect(q.take("r4.2", 1_000)).toBe(0);
  });
});

describe("unionMs", () => {
  it("is the length a naive cell count of the intervals covers", () => {
    const interval = fc.tuple(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 60 }));
    fc.assert(
      fc.property(fc.array(interval, { maxLength: 12 }), (xs) => {
        let cells = 0;
        for (let c = 0; c < 60; c++) if (xs.some(([from, to]) => from <= c && c < to)) cells++;
        expect(unionMs(xs.map(([a, b]) => [a, b]))).toBe(cells);
      }),
      { numRuns: 500 },
    );
  });
});

describe("otherQueueMs in a run", () => {
  it("30% loss, a busy open loop: peers' queues it gave up on read as queueing, never beyond networkMs", () => {
    const requests = 600;
    const w = assembleWorkload("synthetic", "synthetic", syntheticPool({ subjects: 8, scale: 0.05 }), {
      seed: 3,
      requests,
      skewed: false,
      openLoopRate: 12,
    });
    const r = runSimulation({ ...daemonSimConfig(3, 4), faults: { network: { lossProb: 0.3 } } }, w);
    expect(r.totals.answered).toBe(requests);
    const other = r.records.map((x) => x.otherQueueMs ?? 0);
    expect(Math.max(...other)).toBeGreaterThan(0);
    // A part of the network time, as the record says: never more than it.
    for (const x of r.records) expect(x.otherQueueMs ?? 0).toBeLessThanOrEqual(x.networkMs + 1e-6);
  });

  it("a peer crashes and restarts under 30% loss: re-sent copies' waits stay within networkMs", () => {
    const requests = 600;
    const w = assembleWorkload("synthetic", "synthetic", syntheticPool({ subjects: 8, scale: 0.05 }), {
      seed: 5,
      requests,
      skewed: false,
      openLoopRate: 12,
    });
    const faults = {
      network: { lossProb: 0.3 },
      node: { crashes: [{ node: 0, atMs: 15_000, restartAtMs: 15_500 }] },
    };
    // Node 0 restarts while origins still wait on forwards it held: they re-send them to it.
    const r = runSimulation({ ...daemonSimConfig(3, 4), faults }, w);
    expect(r.totals.answered).toBe(requests);
    expect(Math.max(...r.records.map((x) => x.otherQueueMs ?? 0))).toBeGreaterThan(0);
    for (const x of r.records) expect(x.otherQueueMs ?? 0).toBeLessThanOrEqual(x.networkMs + 1e-6);
  });
});
