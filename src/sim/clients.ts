/**
 * The client side of the workload: each request's tries, its record once answered or failed, what
 * is sent next (the closed loop's next request, an open loop's follow-up turns, a retry after a
 * refusal) and the outcome tallies the totals read. Which node a try enters, and what the node does
 * with it, is the run loop's (run.ts).
 */
import type { EngineRequest } from "../core/engine.js";
import { retryAfterSec } from "../core/node/replies.js";
import type { Effect } from "../core/node/types.js";
// The answer every correct run must give: the simulated engine's deterministic output.
import { simOutput as expectedText } from "../engines/sim/cost.js";
import type { Workload } from "../workload/types.js";
import type { ClientFaultModel } from "./faults/client.js";
import { type Agenda, requestIndex } from "./run-state.js";
import { followUpsOf } from "./setup.js";
import type { SimProgress, SimRecord } from "./types.js";

const MAX_CLIENT_TRIES = 4;

interface ClientReq {
  tries: number;
  startMs: number;
  origin: number;
  done: boolean;
}

export class SimClients {
  private readonly reqs: Workload["requests"];
  readonly total: number;
  private readonly client: ClientReq[];
  readonly records: SimRecord[] = [];
  private readonly latencies: Float64Array;
  private answered = 0;
  private failed = 0;
  private incorrect = 0;
  private duplicateReplies = 0;
  /** Tries sent again: after a refusal, or when the node a client waited on crashed. */
  retries = 0;
  /** Requests whose client hung up before the answer (faults/client.ts, `abandon`). */
  abandoned = 0;
  /** Requests answered or failed. */
  finished = 0;
  private sumPrompt = 0;
  private sumPredicted = 0;
  private sumActual = 0;
  private forwardedServed = 0;
  private readonly servedCount: number[];
  private nextClosed = 0;
  lastFinishAt = 0;
  private readonly progressStep: number;
  private readonly closedLoop: boolean;
  // Open loop: follow-up turns (chat) are sent a think time after their predecessor is answered.
  private readonly followUps: Map<number, number[]>;

  constructor(
    workload: Workload,
    /** Nodes in the run. */
    private readonly N: number,
    private readonly faults: ClientFaultModel,
    private readonly queue: Agenda,
    private readonly idxOf: ReadonlyMap<string, number>,
    private readonly keepRecords: boolean,
    /** Where a wrong answer is reported (invariant runs only). */
    private readonly violations: string[] | undefined,
    private readonly opts: SimProgress,
  ) {
    this.reqs = workload.requests;
    this.total = this.reqs.length;
    this.client = this.reqs.map(() => ({ tries: 0, startMs: -1, origin: -1, done: false }));
    this.latencies = new Float64Array(this.total);
    this.servedCount = new Array<number>(N).fill(0);
    this.progressStep = Math.max(1, Math.floor(this.total / 200));
    this.closedLoop = workload.arrival === "closed-loop";
    this.followUps = followUpsOf(workload);
  }

  /** The first submissions: the closed loop's first request, or every open-loop arrival but follow-ups. */
  schedule(): void {
    if (this.closedLoop) {
      if (this.total > 0) this.queue.push({ at: 0, k: "submit", req: this.nextClosed++ });
    } else {
      this.reqs.forEach((r, i) => {
        if (!r.after) this.queue.push({ at: r.arrivalMs ?? 0, k: "submit", req: i });
      });
    }
  }

  isDone(ri: number): boolean {
    return (this.client[ri] as ClientReq).done;
  }

  /** The node request `ri`'s schedule assigned it. */
  entryOf(ri: number): number {
    return (this.reqs[ri]!.entry ?? ri) % this.N;
  }

  /** The node its last try entered (-1: none yet). */
  originOf(ri: number): number {
    return (this.client[ri] as ClientReq).origin;
  }

  /** The reqId of its last try. */
  reqIdOf(ri: number): string {
    return `r${ri}.${(this.client[ri] as ClientReq).tries}`;
  }

  /** Request `ri` is being submitted: its first submission starts its clock (and its hang-up's). */
  begin(ri: number, now: number): void {
    const c = this.client[ri] as ClientReq;
    if (c.startMs >= 0) return;
    c.startMs = now;
    const hangUp = this.faults.hangsUpAfter(ri);
    if (hangUp !== undefined) this.queue.push({ at: now + hangUp, k: "gone", req: ri });
  }

  /** A try of `ri` enters node `origin`: its reqId. */
  tryAt(ri: number, origin: number): string {
    const c = this.client[ri] as ClientReq;
    c.tries++;
    c.origin = origin;
    return this.reqIdOf(ri);
  }

  /** What the try `reqId` of `ri` asks. */
  request(ri: number, reqId: string, deadlineMs: number | undefined): EngineRequest {
    const wr = this.reqs[ri]!;
    return {
      id: reqId,
      tokens: wr.tokens,
      maxTokens: this.faults.maxTokens(ri, wr.maxTokens),
      ...(wr.temperature === undefined ? {} : { temperature: wr.temperature }),
      ...(deadlineMs === undefined ? {} : { deadlineMs }),
    };
  }

  /** Its client hung up at `now`: the request failed. */
  abandon(ri: number, now: number): void {
    this.abandoned++;
    this.fail(ri, now);
  }

  /** Request `ri` fails at `now` (an answer, not a hang). */
  fail(ri: number, now: number): void {
    const wr = this.reqs[ri]!;
    this.finish(ri, failedRecord(ri, wr, this.entryOf(ri), (this.client[ri] as ClientReq).startMs, now), now);
  }

  /** The node a try of `reqId` waited on crashed: its client submits again at once. */
  resubmit(reqId: string, now: number): void {
    this.retries++;
    this.queue.push({ at: now, k: "submit", req: requestIndex(reqId) });
  }

  /** A node answered a reqId it did not owe (again, or unasked). */
  duplicate(): void {
    this.duplicateReplies++;
  }

  /**
   * Node `origin`'s reply to a try it owed, at `now`; `answerLegMs`: how long the peer's answer it
   * carries was on the wire (0: none); `otherQueueMs`: its queue waits but the answering run's
   * (queue-waits.ts). A failure is tried again while tries remain.
   */
  reply(
    origin: number,
    e: Extract<Effect, { type: "reply" }>,
    now: number,
    answerLegMs: number,
    otherQueueMs = 0,
  ): void {
    const ri = requestIndex(e.reqId);
    const c = this.client[ri] as ClientReq;
    const wr = this.reqs[ri]!;
    if (!e.outcome.ok && c.tries < MAX_CLIENT_TRIES) {
      this.retries++;
      // Refused by load (a 429): the client waits its Retry-After, as a real one does; else at once.
      const waitSec = retryAfterSec(e.outcome);
      this.queue.push({ at: now + (waitSec === undefined ? 1 : waitSec * 1_000), k: "submit", req: ri });
      return;
    }
    const r = e.record;
    const ok = e.outcome.ok;
    const correct =
      ok && e.outcome.result.text === expectedText(wr.tokens, this.faults.maxTokens(ri, wr.maxTokens));
    if (this.violations && ok && !correct) this.violations.push(`t=${now}: wrong output for request ${ri}`);
    this.finish(
      ri,
      {
        index: ri,
        id: wr.id,
        group: wr.group,
        entry: this.entryOf(ri),
        origin,
        target: this.idxOf.get(r.target) ?? -1,
        served: r.servedBy === undefined ? -1 : (this.idxOf.get(r.servedBy) ?? -1),
        startMs: c.startMs,
        endMs: now,
        latencyMs: now - c.startMs,
        promptTokens: r.promptTokens,
        predictedHitTokens: r.predictedHitTokens,
        actualHitTokens: r.actualHitTokens,
        hops: r.hops,
        fallbacks: r.fallbacks,
        queueMs: r.queueMs,
        prefillMs: r.prefillMs,
        decodeMs: r.decodeMs,
        networkMs: r.networkMs,
        answerLegMs,
        otherQueueMs,
        retries: c.tries - 1,
        ok,
        correct,
      },
      now,
    );
  }

  private finish(ri: number, rec: SimRecord, now: number): void {
    const c = this.client[ri] as ClientReq;
    c.done = true;
    this.finished++;
    this.lastFinishAt = now;
    this.latencies[ri] = rec.latencyMs;
    if (rec.ok) {
      this.answered++;
      this.sumPrompt += rec.promptTokens;
      this.sumPredicted += rec.predictedHitTokens;
      this.sumActual += rec.actualHitTokens;
      if (rec.served >= 0) this.servedCount[rec.served] = (this.servedCount[rec.served] ?? 0) + 1;
      if (rec.served !== rec.origin) this.forwardedServed++;
      if (!rec.correct) this.incorrect++;
    } else this.failed++;
    if (this.keepRecords) this.records.push(rec);
    const { onProgress } = this.opts;
    if (onProgress && (this.finished % this.progressStep === 0 || this.finished === this.total))
      onProgress(this.finished, this.total);
    if (this.closedLoop && this.nextClosed < this.total)
      this.queue.push({ at: now, k: "submit", req: this.nextClosed++ });
    for (const f of this.followUps.get(ri) ?? [])
      this.queue.push({ at: now + this.reqs[f]!.after!.thinkMs, k: "submit", req: f });
  }

  /** The outcome totals (the result's fields from `requests` to `forwardedShare`, in its order). */
  outcomes() {
    const lat = this.latencies.filter((_, i) => (this.client[i] as ClientReq).done);
    lat.sort();
    let sumLat = 0;
    for (const v of lat) sumLat += v;
    let hot = 0;
    for (let i = 1; i < this.N; i++) if ((this.servedCount[i] ?? 0) > (this.servedCount[hot] ?? 0)) hot = i;
    const pct = (p: number): number =>
      lat.length === 0 ? 0 : (lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] as number);
    const { answered, sumPrompt } = this;
    return {
      requests: this.total,
      answered,
      failed: this.failed,
      incorrect: this.incorrect,
      duplicateReplies: this.duplicateReplies,
      meanLatencyMs: lat.length === 0 ? 0 : sumLat / lat.length,
      p50LatencyMs: pct(0.5),
      p99LatencyMs: pct(0.99),
      expectedHitRate: sumPrompt === 0 ? 0 : this.sumPredicted / sumPrompt,
      actualHitRate: sumPrompt === 0 ? 0 : this.sumActual / sumPrompt,
      hotspotShare: answered === 0 ? 0 : (this.servedCount[hot] ?? 0) / answered,
      hotspotNode: hot,
      forwardedShare: answered === 0 ? 0 : this.forwardedServed / answered,
    };
  }
}

function failedRecord(
  index: number,
  wr: Workload["requests"][number],
  entry: number,
  startMs: number,
  now: number,
): SimRecord {
  return {
    index,
    id: wr.id,
    group: wr.group,
    entry,
    origin: -1,
    target: -1,
    served: -1,
    startMs,
    endMs: now,
    latencyMs: now - startMs,
    promptTokens: wr.tokens.length,
    predictedHitTokens: 0,
    actualHitTokens: 0,
    hops: 0,
    fallbacks: 0,
    queueMs: 0,
    prefillMs: 0,
    decodeMs: 0,
    networkMs: 0,
    retries: 0,
    ok: false,
    correct: false,
  };
}
