/**
 * QueueWaits against a naive model (queue-waits.ts): random, seeded lives of one request — forwards,
 * copies delivered again, runs, answers and errors, peer crashes, give-ups, a run at its origin, other
 * requests' forwards queued at its peers — replayed millisecond by millisecond. A millisecond counts
 * when the request is queued at its origin, or at a peer in a stay its origin still waits on, and is
 * not the answering run's wait or run. A peer's queue is the executor's: by arrival, a job past its
 * deadline dropped unanswered at its turn; QueueWaits is told a run's peer, never which job it is.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { QueueWaits } from "../../src/sim/queue-waits.js";

type Op =
  | { k: "send"; peer: number }
  | { k: "deliver"; pick: number; deadline: number | undefined }
  | { k: "run"; peer: number }
  | { k: "answer"; pick: number }
  | { k: "end" }
  | { k: "crash"; peer: number }
  | { k: "here" }
  /** Another request's forward reaches `peer`: it queues there among this request's jobs. */
  | { k: "other"; peer: number };

interface ModelStay {
  state: "queued" | "running" | "answered" | "lost" | "dropped";
  ran: boolean;
  /** When it arrived, and its place among arrivals there. */
  at: number;
  order: number;
  /** How long its origin said it would wait (none: for ever). */
  deadline: number | undefined;
}
interface ModelAttempt {
  peer: number;
  waited: boolean;
  stays: ModelStay[];
}
/** What holds the request in one millisecond. */
interface Cell {
  hold: number;
  here: boolean;
  stays: { stay: ModelStay; waited: boolean; running: boolean }[];
}

const isOpen = (s: ModelStay | undefined): s is ModelStay =>
  s !== undefined && (s.state === "queued" || s.state === "running");

/** Plays `ops` on both, `gap` ms apart; returns [QueueWaits's figure, the naive count]. */
function play(ops: Op[], gaps: number[], byPeer: boolean): [number, number] {
  const q = new QueueWaits();
  const id = "m.1";
  const attempts: ModelAttempt[] = [];
  const cells: Cell[] = [];
  let hold = 0; // index of the current hold; -1: not held
  let holds = 1;
  let here = false;
  let heldBeforeRun = -1;
  let now = 0;
  let arrivals = 0;
  const others: { id: string; peer: number; order: number; queued: boolean }[] = [];
  q.submitted(id, 0);
  const current = (): ModelAttempt | undefined => attempts.find((a) => a.waited);
  const advance = (ms: number): void => {
    for (let t = 0; t < ms; t++) {
      const stays = attempts.flatMap((a) =>
        a.stays.filter(isOpen).map((s) => ({ stay: s, waited: a.waited, running: s.state === "running" })),
      );
      cells.push({ hold, here, stays });
    }
    now += ms;
  };
  ops.forEach((op, i) => {
    advance(gaps[i % gaps.length] as number);
    const cur = current();
    if (op.k === "send" && cur === undefined && !here) {
      attempts.push({ peer: op.peer, waited: true, stays: [] });
      q.sent(id, op.peer, attempts.length, now);
      hold = -1;
    } else if (op.k === "deliver" && attempts.length > 0) {
      const n = attempts.length - 1 - (op.pick % attempts.length);
      const a = attempts[n] as ModelAttempt;
      const last = a.stays.at(-1);
      if (!isOpen(last))
        a.stays.push({ state: "queued", ran: false, at: now, order: arrivals++, deadline: op.deadline });
      q.delivered(id, a.peer, n + 1, now, op.deadline);
    } else if (op.k === "run") {
      // The peer's queue reaches its next job, first come first: this request's jobs whose deadline
      // passed go unrun and unanswered; the first still wanted runs, this request's or another's.
      // None: jobs the model does not see ran meanwhile.
      const line = [
        ...attempts.flatMap((a) => (a.peer === op.peer ? a.stays.filter((x) => x.state === "queued") : [])),
        ...others.filter((o) => o.peer === op.peer && o.queued),
      ].sort((x, y) => x.order - y.order);
      const late = (x: ModelStay): boolean => x.deadline !== undefined && now - x.at > x.deadline;
      const next = line.find((x) => !("state" in x) || !late(x));
      if (next === undefined) return;
      for (const x of line.slice(0, line.indexOf(next))) if ("state" in x) x.state = "dropped";
      if (!("state" in next)) {
        next.queued = false;
        q.left(next.id, op.peer, now);
        return;
      }
      next.state = "running";
      next.ran = true;
      q.left(id, op.peer, now);
    } else if (op.k === "answer" && attempts.length > 0) {
      const n = attempts.length - 1 - (op.pick % attempts.length);
      const a = attempts[n] as ModelAttempt;
      const s = a.stays.at(-1);
      if (!isOpen(s)) return;
      s.state = "answered";
      q.left(id, a.peer, now, n + 1);
    } else if (op.k === "end" && cur !== undefined) {
      cur.waited = false;
      q.ended(id, attempts.indexOf(cur) + 1, now);
      hold = holds++;
    } else if (op.k === "crash") {
      for (const a of attempts) {
        const s = a.stays.at(-1);
        if (a.peer === op.peer && isOpen(s)) s.state = "lost";
      }
      // Its queue goes with it: other requests' jobs there never run.
      for (const o of others) if (o.peer === op.peer) o.queued = false;
      q.crashed(op.peer, [], now);
    } else if (op.k === "other") {
      const o = { id: `o.${others.length}`, peer: op.peer, order: arrivals++, queued: true };
      others.push(o);
      q.submitted(o.id, now);
      q.sent(o.id, o.peer, 1, now);
      q.delivered(o.id, o.peer, 1, now);
    } else if (op.k === "here" && cur === undefined && !here) {
      heldBeforeRun = hold;
      hold = -1;
      here = true;
      q.ranHere(id, now);
    }
  });
  // The reply: the last attempt with a run that answered, if any (and `byPeer`), else a run here.
  let answeredBy: { peer: number; attempt: number } | undefined;
  let answering: ModelStay | undefined;
  attempts.forEach((a, n) => {
    const s = a.stays.findLast((x) => x.ran && x.state === "answered");
    if (s !== undefined) {
      answeredBy = { peer: a.peer, attempt: n + 1 };
      answering = s;
    }
  });
  if (!byPeer || answeredBy === undefined) {
    answeredBy = answering = undefined;
    if (!here) {
      const cur = current();
      if (cur !== undefined) {
        cur.waited = false;
        q.ended(id, attempts.indexOf(cur) + 1, now);
        hold = holds++;
      }
      advance(3);
      heldBeforeRun = hold;
      hold = -1;
      here = true;
      q.ranHere(id, now);
    }
  }
  advance(2);
  const got = q.take(id, now, answeredBy);
  let naive = 0;
  for (const c of cells) {
    const queued = c.hold >= 0 || c.stays.some((s) => s.waited && !s.running);
    const known =
      answering !== undefined
        ? c.stays.some((s) => s.stay === answering)
        : c.here || (c.hold >= 0 && c.hold === heldBeforeRun);
    if (queued && !known) naive++;
  }
  return [got, naive];
}

const deadline = fc.option(fc.nat(12), { nil: undefined });
/** Which attempt, from the latest back: mostly the latest, as copies of the live forward are. */
const pick = fc.oneof({ weight: 2, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.nat(5) });
/** Most lives at one peer: attempts meet there. */
const peer = fc.oneof({ weight: 3, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.constant(2) });
// Weighted so that lives go on (a run here ends them) and attempts meet at one peer: the cases where
// a run's job is not the oldest attempt's there take several sends, ends and runs in one life.
const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ k: fc.constant("send" as const), peer }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant("deliver" as const), pick, deadline }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant("run" as const), peer }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("answer" as const), pick }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("end" as const) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("crash" as const), peer }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant("here" as const) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant("other" as const), peer }) },
);

describe("QueueWaits against a naive model", () => {
  it("counts each queued millisecond once, bar the answering run's wait and run", () => {
    fc.assert(
      fc.property(
        fc.array(op, { maxLength: 24 }),
        fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 8 }),
        fc.boolean(),
        (ops, gaps, byPeer) => {
          const [got, naive] = play(ops, gaps, byPeer);
          expect(got).toBe(naive);
        },
      ),
      { numRuns: 10_000, seed: 20261207 },
    );
  });
});
