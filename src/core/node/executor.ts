/**
 * The local executor: this node's FIFO queue and engine runs, and the exact tree that mirrors the
 * engine's cache (the paper's Trie_i). Before a run it evicts what the prompt needs (Algorithm 1 lines
 * 7–10) and pins the matched prefix; after it, the tree takes what the engine now caches (lines
 * 12–13). Its runs teach run-costs.ts the service time and prefill costs; it tracks the eviction
 * pressure rent-or-buy discounts by.
 *
 * It knows nothing of who asked: a job finishing is RETURNED (`Completion`) with its timing, and
 * node.ts decides whether that answers a client of ours or a peer's forward. Its parts (executor/):
 * jobs.ts the vocabulary, job-queue.ts the waiting line and its prices, running-jobs.ts the slots
 * and their elapsed runs, run-cache.ts the tree as runs pin, evict and fill it; this file runs the
 * jobs and reads the waits.
 */
import type { EngineRequest, EngineResult, EvictedRun, Tokens } from "../engine.js";
import { invariant } from "../invariant.js";
import { keyTokens, promptMatch } from "../namespace.js";
import type { RadixTree } from "../radix-tree.js";
import type { EngineCosts } from "../snapshot.js";
import { ABORT_COUNTER, type AbortReason } from "./abort-runs.js";
import type { NodeConfig } from "./config.js";
import type { LearnedCosts } from "./cost-model.js";
import type { Eviction } from "./demand.js";
import type { CostSample } from "./engine-costs.js";
import { JobQueue } from "./executor/job-queue.js";
import {
  type Completion,
  type ExecutorCounters,
  type Job,
  type JobSpec,
  newJob,
  stripCache,
  zeroCounters,
} from "./executor/jobs.js";
import { RunCache } from "./executor/run-cache.js";
import { RunningJobs } from "./executor/running-jobs.js";
import { MAX_REPORTED_DEPTH } from "./peer-load.js";
import type { SelfView } from "./routing.js";
import { RunCosts } from "./run-costs.js";
import type { ServingLoad } from "./serving.js";
import type { Effect, NodeId, ServedTiming } from "./types.js";

export type { Completion, ExecutorCounters, JobSpec } from "./executor/jobs.js";

export class Executor {
  /** The jobs in the slots (executor/running-jobs.ts). */
  private readonly running: RunningJobs;
  /** The waiting jobs (executor/job-queue.ts). */
  private readonly queue: JobQueue;
  /** The tree as runs use it (executor/run-cache.ts). */
  private readonly cache: RunCache;
  // Kept across restart(): ids stay unique, and the machine (its costs) did not change.
  private jobSeq = 0;
  /** What our runs taught us of our costs (run-costs.ts). */
  private readonly costs: RunCosts;
  counters!: ExecutorCounters;

  constructor(
    private readonly config: NodeConfig,
    private readonly selfId: NodeId,
    private readonly paranoid: boolean,
  ) {
    this.costs = new RunCosts(config);
    this.running = new RunningJobs(config);
    this.cache = new RunCache(config);
    this.queue = new JobQueue({
      on: () => this.workWaits(),
      cachedMatch: (key) => this.cache.tree.match(key),
      running: () => this.running.values(),
      runFor: (uncached, hit, maxTokens) => this.costs.runFor(uncached, hit, maxTokens),
    });
    this.reset();
  }

  /** A crash-restart: the cache and every job are gone; learned costs stay. */
  reset(): void {
    this.cache.reset();
    this.queue.reset();
    this.running.clear();
    this.counters = zeroCounters();
  }

  /** The exact local tree. Read-only outside the executor. */
  get tree(): RadixTree {
    return this.cache.tree;
  }

  /** Waiting + running. */
  queueDepth(): number {
    return this.queue.waiting + this.running.size;
  }

  /**
   * The queue depth peers are told (offload): a run far past the mean service time counts as the
   * jobs it is still expected to displace — as long again as it ran, as `waitFrom` prices it here.
   * Its depth alone (one job) hides an engine held by a long generation: every peer kept sending it
   * forwards by cache affinity, each waiting behind it until overdue (BENCHMARKS.md, "Recent
   * prefixes in routing").
   */
  reportedDepth(now: number): number {
    // The sum, not only the held part: a queue near maxQueue's bound plus a held engine would pass what
    // peers accept (gossip header, ack), and each would refuse the whole message.
    const depth = this.queueDepth();
    const reported = Math.min(depth + this.running.heldJobs(now, this.costs.serviceMs), MAX_REPORTED_DEPTH);
    // Its readers (peers, /cluster, the oracle) count on a whole depth never below the jobs.
    invariant(
      Number.isInteger(reported) && reported >= Math.min(depth, MAX_REPORTED_DEPTH),
      () => `reported depth ${reported} for ${depth} jobs`,
    );
    return reported;
  }

  /** This node as a routing candidate for `request` (its match is exact, in its namespace). */
  selfView(id: NodeId, request: EngineRequest, now?: number): SelfView {
    const tree = this.cache.tree;
    const view: SelfView = {
      id,
      match: promptMatch(request, tree.match(keyTokens(request))),
      queueDepth: this.queueDepth(),
      capacityTokens: tree.capacity,
      treeTokens: tree.size,
    };
    // When a request queued now would start: behind every job waiting here, not only the running one.
    const wait = this.config.offload && now !== undefined ? this.admissionWaitMs(now) : undefined;
    if (wait !== undefined) view.waitMs = wait;
    return view;
  }

  /**
   * Offload: when the job `ahead` places behind the running ones would start, elapsed-aware and,
   * with `aheadWorkMs`, priced (executor/running-jobs.ts `startsIn`). Undefined until a run is timed
   * (priced: until the costs are measured).
   */
  waitFrom(ahead: number, now: number, aheadWorkMs?: number): number | undefined {
    // Priced jobs need no timed run here: a calibrated cost model prices them from the start.
    const priced = this.workWaits() && this.costs.engineCosts() !== undefined;
    const svc = this.costs.serviceMs ?? (priced ? this.costs.learned().serviceMs : undefined);
    if (svc === undefined) return undefined;
    return this.running.startsIn(ahead, now, svc, this.workWaits() ? aheadWorkMs : undefined);
  }

  /**
   * Queue-aware waits (with `maxWaitMs`): a wait is the expected runs of the jobs ahead, each priced
   * when queued — its uncached prompt given the cache and every job queued before it — rather than
   * their count × the mean service time. A cold queue of uncached prompts takes several times the
   * mean, a warm one of hits a fraction of it: counting jobs admitted requests that then waited far
   * past the bound. Without a bound, routing and offload keep the count (priced waits there raised
   * the 4-node open-loop p99; BENCHMARKS.md, "Open loop: where the p99 goes").
   */
  private workWaits(): boolean {
    return this.config.maxWaitMs > 0;
  }

  /**
   * Offload: our clients' jobs still waiting (the last `limit`, last first), each with when it
   * would start.
   * Read-only; `takeQueued` removes one.
   */
  waitingClients(
    now: number,
    limit: number,
  ): { reqId: string; request: EngineRequest; startsInMs: number }[] {
    return this.queue.waitingClients(limit, (ahead, aheadWork) => this.waitFrom(ahead, now, aheadWork));
  }

  /** Whether our client's job for `reqId` runs now (started, not finished). */
  runsClient(reqId: string): boolean {
    return this.running.runsClient(reqId);
  }

  /** Offload: removes our client's waiting job for `reqId` (false: none waits). */
  takeQueued(reqId: string): boolean {
    if (!this.queue.takeClient(reqId)) return false;
    this.check();
    return true;
  }

  /**
   * Our client's job for `reqId`, whose client hung up: taken out of the queue if it waits
   * ("queued"); aborted if it runs and the engine can ("running"; else it runs to its end and the
   * tree takes what it caches); undefined when there is none.
   */
  dropClient(reqId: string, out: Effect[]): "queued" | "running" | undefined {
    if (this.takeQueued(reqId)) return "queued";
    if (!this.runsClient(reqId)) return undefined;
    this.abortClient(reqId, "clientGone", out);
    return "running";
  }

  /** Our client's running job for `reqId` goes unanswered: its run is aborted if the engine can. */
  abortClient(reqId: string, reason: AbortReason, out: Effect[]): void {
    this.running.abortClient(reqId, reason, out);
  }

  /** The running forward with this key was finally cancelled by its origin: aborted if the engine can. */
  abortForward(key: string, out: Effect[]): void {
    this.running.abortForward(key, out);
  }

  /** When a job queued now would start (elapsed-aware `waitFrom`; undefined until a run is timed). */
  admissionWaitMs(now: number): number | undefined {
    return this.waitFrom(this.queue.waiting, now, this.queue.workMs);
  }

  /** What serving judges an arriving forward by (serving.ts `ServingLoad`). */
  loadNow(now: number): ServingLoad {
    return {
      full: this.full(),
      expectedWaitMs: this.expectedWaitMs(now),
      admissionWaitMs: this.admissionWaitMs(now),
    };
  }

  /** The queue bound (`maxQueue`) is reached: refuse more work. */
  full(): boolean {
    return this.queueDepth() >= this.config.maxQueue;
  }

  enqueue(spec: JobSpec, now: number, out: Effect[]): void {
    this.queue.add(newJob(spec, `j${++this.jobSeq}`, now));
    this.pump(now, out);
  }

  /** Starts queued jobs while there is a free slot (FIFO; a priority job by its arrival). Algorithm 1 lines 7-11. */
  pump(now: number, out: Effect[]): void {
    while (this.running.size < this.config.concurrency) {
      const job = this.queue.next();
      if (job === undefined) break;
      if (now > job.expiresAt) {
        // Checked at admission too (serving.ts), but a queue can slow down after it: no run for nobody.
        this.counters.expiredForwards++;
        this.queue.repriceAfter(job);
        continue;
      }
      job.startedAt = now;
      const evicted: EvictedRun[] = this.cache.start(job);
      for (const r of evicted) this.counters.evictedTokens += r.path.length - r.keep;
      this.running.add(job);
      out.push({
        type: "engine-run",
        jobId: job.jobId,
        request: job.request,
        evicted,
        cacheTokens: job.cacheTokens,
      });
    }
    this.check();
  }

  /** Drops the queued job with this key (it never runs). False if none waits (started, or unknown). */
  cancelQueued(key: string): boolean {
    return this.queue.cancelKey(key);
  }

  /** The job with this key while it waits (ranMs undefined) or runs (ranMs = how long so far). */
  jobFor(key: string, now: number): { request: EngineRequest; ranMs: number | undefined } | undefined {
    const queued = this.queue.byKeyOf(key);
    if (queued) return { request: queued.request, ranMs: undefined };
    const job = this.running.withKey(key);
    return job && { request: job.request, ranMs: now - job.startedAt };
  }

  /** The engine finished `jobId`; undefined for a job from before a restart. */
  done(jobId: string, result: EngineResult, now: number): Completion | undefined {
    const job = this.running.get(jobId);
    if (!job) return undefined;
    // Algorithm 1 lines 12-13: the tree mirrors what the engine now caches.
    this.cache.done(job, result, this.paranoid);
    this.finish(job);
    this.costs.sample(job.request.tokens.length, result, now - job.startedAt);
    if (this.paranoid) this.checkWalks();
    if (job.kind === "forward") this.counters.servedForPeers++;
    else if (job.kind === "client") this.counters.servedLocal++;
    const timing: ServedTiming = {
      servedBy: this.selfId,
      queueMs: job.startedAt - job.enqueuedAt,
      prefillMs: result.prefillMs,
      decodeMs: result.decodeMs,
    };
    return { job, result: stripCache(result), timing };
  }

  /** An engine-managed cache changed between runs: the tree takes its contents now (else ignored). */
  cacheChanged(sequences: readonly Tokens[]): void {
    if (this.config.cacheMode !== "engine-managed") return;
    this.cache.resetTo(sequences);
    if (this.paranoid) this.checkWalks();
  }

  /**
   * The engine aborted `jobId` as asked, keeping what it says: node-managed, the first `kept` tokens
   * of the job's cache key (within what the job reserved); engine-managed, `sequences` (its cache
   * now), when given. Undefined for a job from before a restart.
   */
  aborted(jobId: string, kept: number, sequences: Tokens[] | undefined): Readonly<JobSpec> | undefined {
    const job = this.running.get(jobId);
    if (!job) return undefined;
    invariant(job.aborting !== undefined, () => `job ${jobId} aborted, never asked to`);
    this.counters[ABORT_COUNTER[job.aborting]]++;
    this.cache.keep(job, kept);
    this.finish(job);
    if (sequences !== undefined) this.cacheChanged(sequences);
    this.queue.repriceAfter(job);
    return job;
  }

  /** The engine failed `jobId`; undefined for a job from before a restart. */
  failed(jobId: string): Readonly<JobSpec> | undefined {
    const job = this.running.get(jobId);
    if (!job) return undefined;
    this.counters.engineFailures++;
    this.finish(job);
    // What it would have cached is not: the jobs that counted on it run colder.
    this.queue.repriceAfter(job);
    return job;
  }

  private finish(job: Job): void {
    this.running.delete(job);
    this.cache.release(job);
    this.check();
  }

  /**
   * How long a job enqueued now would wait before it starts, from the measured service time
   * (undefined until a run is timed). With every slot busy, the running jobs have half a service
   * time left on average and the waiting ones drain `concurrency` at a time. A held engine
   * (offload) counts as the jobs peers are told it holds (`reportedDepth`).
   */
  expectedWaitMs(now: number, svc = this.costs.serviceMs): number | undefined {
    if (svc === undefined) return undefined;
    return this.running.waitBehind(this.queue.waiting, now, svc, this.costs.serviceMs);
  }

  /**
   * When a job for `request` will be answered: the rest of the run if it has run `ranMs`, else the
   * queue wait plus the run.
   */
  etaMs(request: EngineRequest, now: number, ranMs?: number): number {
    return ranMs === undefined
      ? (this.expectedWaitMs(now, this.costs.serviceMs ?? this.learnedCosts().serviceMs) ?? 0) +
          this.serviceFor(request)
      : Math.max(0, this.serviceFor(request) - ranMs);
  }

  /**
   * Expected service time of `request` here: its uncached prefill and the decode of its `maxTokens`,
   * at least the measured mean.
   */
  private serviceFor(request: EngineRequest): number {
    const reused = promptMatch(request, this.cache.tree.match(keyTokens(request)));
    return this.costs.serviceFor(request.tokens.length - reused, reused, request.maxTokens);
  }

  /** Start-up calibration (run-costs.ts): these runs replace the configured prior. */
  calibrate(samples: readonly CostSample[]): void {
    this.costs.calibrate(samples);
  }

  /** Our engine's cost model, once calibration or enough runs measured it; undefined before. */
  engineCosts(): EngineCosts | undefined {
    return this.costs.engineCosts();
  }

  /** The costs learned from our own runs (what cost-aware routing sees). */
  learnedCosts(): LearnedCosts {
    return this.costs.learned();
  }

  /** Push-back to advertise now (ms; 0 = none). */
  pushBackMs(): number {
    const depth = this.queueDepth();
    if (depth <= this.config.pushBackQueueThreshold) return 0;
    if (this.config.pushBackMs > 0) return Math.ceil(this.config.pushBackMs);
    // Expected time for the excess queue to drain at the measured service time (whole ms: wire field).
    const service = this.costs.serviceMs ?? this.config.pollMs;
    return Math.max(1, Math.ceil((depth - this.config.pushBackQueueThreshold) * service));
  }

  /** The eviction pressure and cache turnover rent-or-buy reads (executor/run-cache.ts). */
  eviction(): Eviction {
    return this.cache.eviction();
  }

  /** Executor accounting, O(1): after every change of the queue or the running set. */
  private check(): void {
    invariant(this.running.size <= this.config.concurrency, "more jobs running than slots");
    invariant(this.cache.reserved >= 0, "reserved cache tokens went negative");
    invariant(this.queue.consistent(), "queue accounting broke");
    this.cache.check(this.running.size);
  }

  /** The walks (`checkInvariants` only): once per engine run, when the tree takes its new contents. */
  private checkWalks(): void {
    this.queue.checkWalk();
    this.cache.checkWalk();
  }
}
