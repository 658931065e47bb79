/**
 * The executor's waiting line: FIFO, a priority job placed by its arrival (`since`), cancels and
 * offload taking jobs out, and — with queue-aware waits (`maxWaitMs`) — each waiting job's priced
 * run and their sum, what admission and offload read a wait from. It owns the waiting jobs only:
 * the executor takes them out to run (`next`), and the running ones are its own.
 */
import type { EngineRequest, Tokens } from "../../engine.js";
import { invariant } from "../../invariant.js";
import { keyTokens, promptMatch } from "../../namespace.js";
import { repriceBehind } from "../queue-prices.js";
import type { Job } from "./jobs.js";

/** What pricing a job reads outside the queue: the cache, the running jobs and the learned costs. */
export interface QueuePricing {
  /** Queue-aware waits are on (`maxWaitMs` > 0): else every job is priced 0. */
  on(): boolean;
  /** The prefix of `key` the cache holds now. */
  cachedMatch(key: Tokens): number;
  /** The jobs running now (they will have cached their prompts when a waiting job starts). */
  running(): Iterable<Job>;
  /** The expected run (ms) of a prompt with `uncached` + `hit` tokens, decoding `maxTokens`. */
  runFor(uncached: number, hit: number, maxTokens: number): number;
}

export class JobQueue {
  private readonly jobs: Job[] = [];
  private head = 0;
  /** Queued jobs that have a key (forwards), by key: what a cancel can still drop. */
  private readonly byKey = new Map<string, Job>();
  /** Cancelled jobs still in the array (not counted as waiting). */
  private cancelled = 0;
  /** Σ `workMs` of the jobs waiting (not cancelled, not started). */
  private work = 0;

  constructor(private readonly pricing: QueuePricing) {}

  /** A crash-restart: every waiting job is gone. */
  reset(): void {
    this.jobs.length = 0;
    this.head = 0;
    this.byKey.clear();
    this.cancelled = 0;
    this.work = 0;
  }

  /** Jobs waiting (cancelled ones not counted). */
  get waiting(): number {
    return this.jobs.length - this.head - this.cancelled;
  }

  /** Σ of the waiting jobs' priced runs (ms; 0 without queue-aware waits). */
  get workMs(): number {
    return this.work;
  }

  /** The O(1) accounting holds (what the executor's `check` asserts). */
  consistent(): boolean {
    return this.cancelled >= 0 && this.waiting >= 0;
  }

  /** Queues `job`, priced behind the jobs it waits for; a priority job ahead of the later arrivals. */
  add(job: Job): void {
    const at = job.priority === true ? this.placeOf(job.since) : this.jobs.length;
    this.price(job, at);
    this.work += job.workMs;
    if (at === this.jobs.length) this.jobs.push(job);
    else if (at === this.head && this.head > 0) this.jobs[--this.head] = job;
    else this.jobs.splice(at, 0, job);
    if (job.key !== undefined) this.byKey.set(job.key, job);
  }

  /**
   * A priority job's place: behind the waiting jobs queued before its request arrived, ahead of the
   * rest. It has waited on timed-out attempts already, so it skips the queue that formed since;
   * but at the head, a burst of them (many losses at once) would starve a request queued before them
   * all, the longest waits of a lossy open loop.
   */
  private placeOf(since: number): number {
    let i = this.jobs.length;
    while (i > this.head && (this.jobs[i - 1] as Job).since > since) i--;
    return i;
  }

  /** Takes the job whose turn it is (cancelled ones are skipped); undefined when none waits. */
  next(): Job | undefined {
    while (this.head < this.jobs.length) {
      const job = this.jobs[this.head] as Job;
      this.jobs[this.head++] = undefined as unknown as Job;
      if (this.head > 1024 && this.head * 2 > this.jobs.length) {
        this.jobs.splice(0, this.head);
        this.head = 0;
      }
      if (job.cancelled) {
        this.cancelled--;
        continue;
      }
      this.unqueue(job);
      if (job.key !== undefined) this.byKey.delete(job.key);
      return job;
    }
    return undefined;
  }

  /** The waiting job with this key (a forward), if any. */
  byKeyOf(key: string): Job | undefined {
    return this.byKey.get(key);
  }

  /** Drops the waiting job with this key (it never runs). False if none waits. */
  cancelKey(key: string): boolean {
    const job = this.byKey.get(key);
    if (!job) return false;
    this.byKey.delete(key);
    this.cancel(job);
    return true;
  }

  /** Drops our client's waiting job for `reqId` (false: none waits). */
  takeClient(reqId: string): boolean {
    for (let i = this.head; i < this.jobs.length; i++) {
      const job = this.jobs[i] as Job;
      if (job.cancelled || job.kind !== "client" || job.reqId !== reqId) continue;
      this.cancel(job);
      return true;
    }
    return false;
  }

  private cancel(job: Job): void {
    job.cancelled = true;
    this.cancelled++;
    this.unqueue(job);
    this.repriceAfter(job);
  }

  /**
   * Our clients' jobs still waiting (the last `limit`, last first), each with when it would start:
   * `startsIn(ahead, aheadWorkMs)` for the jobs ahead of it (undefined stops the list).
   */
  waitingClients(
    limit: number,
    startsIn: (ahead: number, aheadWorkMs: number) => number | undefined,
  ): { reqId: string; request: EngineRequest; startsInMs: number }[] {
    const out: { reqId: string; request: EngineRequest; startsInMs: number }[] = [];
    // From the tail: the last ones wait longest, and moving one changes no start ahead of it.
    let ahead = this.waiting;
    let aheadWork = this.work;
    for (let i = this.jobs.length - 1; i >= this.head && out.length < limit; i--) {
      const job = this.jobs[i] as Job;
      if (job.cancelled) continue;
      aheadWork = Math.max(0, aheadWork - job.workMs);
      const startsInMs = startsIn(--ahead, aheadWork);
      if (startsInMs === undefined) break;
      if (job.kind === "client" && job.priority !== true && job.stays !== true)
        out.push({ reqId: job.reqId, request: job.request, startsInMs });
    }
    return out;
  }

  /** Prices `job`'s expected run here, waiting behind `jobs[..end)` (0 without queue-aware waits). */
  private price(job: Job, end: number): void {
    job.workMs = 0;
    job.pricedMatch = 0;
    if (!this.pricing.on() || job.kind === "check") return;
    job.pricedMatch = this.promisedMatch(keyTokens(job.request), end);
    const hit = promptMatch(job.request, job.pricedMatch);
    job.workMs = this.pricing.runFor(job.request.tokens.length - hit, hit, job.request.maxTokens);
  }

  /**
   * `job` left the queue without running (moved, cancelled, expired, failed): the jobs behind it
   * that counted on the prefix it would have cached are priced again (queue-prices.ts).
   */
  repriceAfter(job: Job): void {
    if (!this.pricing.on()) return;
    const delta = repriceBehind(
      this.jobs,
      this.head,
      job,
      (j, i) => this.price(j, i),
      (j) => j.kind !== "check",
    );
    const waiting = this.waiting;
    this.work = waiting <= 0 ? 0 : Math.max(0, this.work + delta);
  }

  /**
   * The prefix of `key` the cache will hold when a job queued behind `jobs[..end)` starts: the
   * cache's match, or a longer one a job running or waiting ahead of it shares (FIFO: it will have
   * run and been cached by then).
   */
  private promisedMatch(key: Tokens, end: number): number {
    let m = this.pricing.cachedMatch(key);
    const scan = (job: Job) => {
      if (job.cancelled || job.kind === "check") return;
      const k = keyTokens(job.request);
      const n = Math.min(k.length, key.length);
      let i = 0;
      while (i < n && k[i] === key[i]) i++;
      if (i > m) m = i;
    };
    for (const job of this.pricing.running()) scan(job);
    for (let i = this.head; i < end; i++) scan(this.jobs[i] as Job);
    return m;
  }

  /** A waiting job leaves without running (cancelled, moved, expired or started): its work goes. */
  private unqueue(job: Job): void {
    invariant(job.workMs >= 0, "a queued job's priced run is non-negative");
    // Nothing left waiting: exactly zero (float sums drift).
    const waiting = this.waiting;
    this.work = waiting <= 0 ? 0 : Math.max(0, this.work - job.workMs);
  }

  /** The walks (`checkInvariants` only): the waiting count and the keyed jobs. */
  checkWalk(): void {
    let waiting = 0;
    for (let i = this.head; i < this.jobs.length; i++) if (!(this.jobs[i] as Job).cancelled) waiting++;
    invariant(waiting === this.waiting, "queue depth miscounted");
    for (const job of this.byKey.values()) invariant(!job.cancelled, "a cancelled job is still findable");
  }
}
