/**
 * The local executor: this node's FIFO queue and engine runs, and the exact tree that mirrors the
 * engine's cache (the paper's Trie_i). Before a run it evicts what the prompt needs (Algorithm 1 lines
 * 7–10) and pins the matched prefix; after it, the tree takes what the engine now caches (lines
 * 12–13). Its runs teach run-costs.ts the service time and prefill costs; it tracks the eviction
 * pressure rent-or-buy discounts by.
 *
 * It knows nothing of who asked: a job finishing is RETURNED (`Completion`) with its timing, and
 * node.ts decides whether that answers a client of ours or a peer's forward.
 */
import type { EngineRequest, EngineResult, EvictedRun, Tokens } from "../engine.js";
import { invariant } from "../invariant.js";
import { keyTokens, promptMatch } from "../namespace.js";
import { type LockHandle, RadixTree } from "../radix-tree.js";
import type { EngineCosts } from "../snapshot.js";
import { ABORT_COUNTER, type AbortReason } from "./abort-runs.js";
import type { NodeConfig } from "./config.js";
import type { LearnedCosts } from "./cost-model.js";
import type { Eviction } from "./demand.js";
import type { CostSample } from "./engine-costs.js";
import { repriceBehind } from "./queue-prices.js";
import type { SelfView } from "./routing.js";
import { RunCosts } from "./run-costs.js";
import type { ServingLoad } from "./serving.js";
import type { Effect, NodeId, ServedTiming } from "./types.js";

/** Per engine run: eviction pressure remembers ≈ 50 runs. */
const PRESSURE_DECAY = 0.98;

/** What to run: a request of our own client, or a forward a peer sent us. */
export interface JobSpec {
  /** `check`: a spot check (spot-check.ts) — run, never kept in the cache. */
  kind: "client" | "forward" | "check";
  /** The origin's request id. */
  reqId: string;
  from: NodeId | undefined;
  attempt: number;
  request: EngineRequest;
  /** Forwards: the key a cancel or a duplicate finds the job by while it waits or runs. */
  key?: string;
  /**
   * Forwards: ms its origin still waited for it when it arrived (the forward's `deadlineMs`). A job
   * whose deadline passes while it waits is dropped when its turn comes: its origin has moved on.
   */
  deadlineMs?: number | undefined;
  /**
   * Client requests: it lost forward attempts to timeouts already (config `maxTimedOutAttempts`), so
   * it runs ahead of every waiting job that reached us after it (`since`), and is never offloaded.
   */
  priority?: boolean;
  /** Client requests: never offloaded, though it waits in line (`priority` under a wait bound). */
  stays?: boolean;
  /**
   * When the job joined this node's queue (default: now; a priority job: its request's arrival here):
   * a priority job goes ahead of the waiting jobs whose `since` is later.
   */
  since?: number;
}

interface Job extends JobSpec {
  jobId: string;
  enqueuedAt: number;
  startedAt: number;
  handle: LockHandle | undefined;
  matched: number;
  cacheTokens: number;
  /** Cancelled by its origin while queued: skipped when its turn comes. */
  cancelled: boolean;
  /** Running, and its abort asked (abort-runs.ts): why nobody takes its answer. */
  aborting?: AbortReason;
  /** Absolute time past which nobody waits for it (∞: no deadline). */
  expiresAt: number;
  /** With queue-aware waits (`workWaits`): its expected run (ms), priced when queued, again if a job it counted on leaves. */
  workMs: number;
  /** The cached prefix (key tokens) that price counted on (queue-prices.ts). */
  pricedMatch: number;
  since: number;
}

/** A job the engine finished: its spec, the result (engine-private fields removed) and its timing. */
export interface Completion {
  job: Readonly<JobSpec>;
  result: EngineResult;
  timing: ServedTiming;
}

export interface ExecutorCounters {
  /** Queued forwards dropped at their turn because their origin's deadline had passed. */
  expiredForwards: number;
  servedLocal: number;
  servedForPeers: number;
  engineFailures: number;
  evictedTokens: number;
  abortedClientGone: number;
  abortedHedged: number;
  abortedCancelled: number;
}

export class Executor {
  private tree_!: RadixTree;
  private readonly queue: Job[] = [];
  private queueHead = 0;
  private readonly running = new Map<string, Job>();
  /** Queued jobs that have a key (forwards), by key: what a cancel can still drop. */
  private readonly queuedByKey = new Map<string, Job>();
  /** Cancelled jobs still in the queue array (not counted as depth). */
  private cancelledQueued = 0;
  /** Σ `workMs` of the jobs waiting (not cancelled, not started). */
  private queuedWorkMs = 0;
  /** Tokens promised to running jobs (concurrency > 1) so they cannot over-commit the capacity. */
  private reserved = 0;
  // Kept across restart(): ids stay unique, and the machine (its costs) did not change.
  private jobSeq = 0;
  /** Logical LRU clock for the tree: strictly increasing per insert. */
  private tick = 0;
  /** What our runs taught us of our costs (run-costs.ts). */
  private readonly costs: RunCosts;
  /**
   * Decayed tokens inserted into / evicted from our cache: their ratio is the eviction pressure. A
   * prefix bought under full pressure only displaces another, so rent-or-buy discounts by it.
   */
  private insertedDecayed = 0;
  private evictedDecayed = 0;
  /** Runs decayed alike: insertedDecayed / runsDecayed = new tokens a run inserts, lately. */
  private runsDecayed = 0;
  /** Paranoid walks made (`checkInvariants`). */
  private walks = 0;
  counters!: ExecutorCounters;

  constructor(
    private readonly config: NodeConfig,
    private readonly selfId: NodeId,
    private readonly paranoid: boolean,
  ) {
    this.costs = new RunCosts(config);
    this.reset();
  }

  /** A crash-restart: the cache and every job are gone; learned costs stay. */
  reset(): void {
    this.tree_ = new RadixTree({ capacity: this.config.capacityTokens });
    this.queue.length = 0;
    this.queueHead = 0;
    this.running.clear();
    this.queuedByKey.clear();
    this.cancelledQueued = 0;
    this.queuedWorkMs = 0;
    this.reserved = 0;
    this.counters = {
      expiredForwards: 0,
      servedLocal: 0,
      servedForPeers: 0,
      engineFailures: 0,
      evictedTokens: 0,
      abortedClientGone: 0,
      abortedHedged: 0,
      abortedCancelled: 0,
    };
  }

  /** The exact local tree. Read-only outside this file. */
  get tree(): RadixTree {
    return this.tree_;
  }

  /** Waiting + running. */
  queueDepth(): number {
    return this.queue.length - this.queueHead - this.cancelledQueued + this.running.size;
  }

  /** This node as a routing candidate for `request` (its match is exact, in its namespace). */
  selfView(id: NodeId, request: EngineRequest, now?: number): SelfView {
    const view: SelfView = {
      id,
      match: promptMatch(request, this.tree_.match(keyTokens(request))),
      queueDepth: this.queueDepth(),
      capacityTokens: this.tree_.capacity,
      treeTokens: this.tree_.size,
    };
    // When a request queued now would start: behind every job waiting here, not only the running one.
    const wait = this.config.offload && now !== undefined ? this.admissionWaitMs(now) : undefined;
    if (wait !== undefined) view.waitMs = wait;
    return view;
  }

  /**
   * Offload: when the job `ahead` places behind the running ones would start, elapsed-aware.
   * A running job has half its service left on average while younger than it; one that has run
   * longer is expected to run as long again (a long generation shows itself only by running long).
   * `aheadWorkMs` (priced waits): the priced runs of the jobs ahead, instead of `ahead` × the mean.
   * Undefined until a run is timed (priced: until the costs are measured).
   */
  waitFrom(ahead: number, now: number, aheadWorkMs?: number): number | undefined {
    // Priced jobs need no timed run here: a calibrated cost model prices them from the start.
    const priced = this.workWaits() && this.costs.engineCosts() !== undefined;
    const svc = this.costs.serviceMs ?? (priced ? this.costs.learned().serviceMs : undefined);
    if (svc === undefined) return undefined;
    const c = this.config.concurrency;
    if (this.running.size + ahead < c) return 0;
    const work = this.workWaits() && aheadWorkMs !== undefined;
    let soonest = Number.POSITIVE_INFINITY;
    for (const job of this.running.values()) {
      const ran = now - job.startedAt;
      // Priced jobs: what is left of their own expected run (overrunning ones: as long again).
      const own = work && job.workMs > 0 ? job.workMs : svc;
      const floor = work && job.workMs > 0 ? own - ran : Math.max(svc / 2, svc - ran);
      soonest = Math.min(soonest, ran < own ? floor : ran);
    }
    if (this.running.size < c) soonest = 0;
    if (work) return soonest + (aheadWorkMs as number) / c;
    return soonest + Math.floor(ahead / c) * svc;
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

  /** Prices `job`'s expected run here, waiting behind `queue[..end)` (0 without `workWaits`). */
  private priceJob(job: Job, end: number): void {
    job.workMs = 0;
    job.pricedMatch = 0;
    if (!this.workWaits() || job.kind === "check") return;
    job.pricedMatch = this.promisedMatch(keyTokens(job.request), end);
    const hit = promptMatch(job.request, job.pricedMatch);
    job.workMs = this.costs.runFor(job.request.tokens.length - hit, hit, job.request.maxTokens);
  }

  /**
   * `job` left the queue without running (moved, cancelled, expired, failed): the jobs behind it
   * that counted on the prefix it would have cached are priced again (queue-prices.ts).
   */
  private repriceAfter(job: Job): void {
    if (!this.workWaits()) return;
    const delta = repriceBehind(
      this.queue,
      this.queueHead,
      job,
      (j, i) => this.priceJob(j, i),
      (j) => j.kind !== "check",
    );
    const waiting = this.queue.length - this.queueHead - this.cancelledQueued;
    this.queuedWorkMs = waiting <= 0 ? 0 : Math.max(0, this.queuedWorkMs + delta);
  }

  /**
   * The prefix of `key` the cache will hold when a job queued behind `queue[..end)` starts: the
   * tree's match, or a longer one a job running or waiting ahead of it shares (FIFO: it will have
   * run and been cached by then).
   */
  private promisedMatch(key: Tokens, end: number): number {
    let m = this.tree_.match(key);
    const scan = (job: Job) => {
      if (job.cancelled || job.kind === "check") return;
      const k = keyTokens(job.request);
      const n = Math.min(k.length, key.length);
      let i = 0;
      while (i < n && k[i] === key[i]) i++;
      if (i > m) m = i;
    };
    for (const job of this.running.values()) scan(job);
    for (let i = this.queueHead; i < end; i++) scan(this.queue[i] as Job);
    return m;
  }

  /** A queued job leaves the queue without running (cancelled, moved or expired): its work goes. */
  private unqueue(job: Job): void {
    invariant(job.workMs >= 0, "a queued job's priced run is non-negative");
    // Nothing left waiting: exactly zero (float sums drift).
    const waiting = this.queue.length - this.queueHead - this.cancelledQueued;
    this.queuedWorkMs = waiting <= 0 ? 0 : Math.max(0, this.queuedWorkMs - job.workMs);
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
    const out: { reqId: string; request: EngineRequest; startsInMs: number }[] = [];
    // From the tail: the last ones wait longest, and moving one changes no start ahead of it.
    let ahead = this.queue.length - this.queueHead - this.cancelledQueued;
    let aheadWork = this.queuedWorkMs;
    for (let i = this.queue.length - 1; i >= this.queueHead && out.length < limit; i--) {
      const job = this.queue[i] as Job;
      if (job.cancelled) continue;
      aheadWork = Math.max(0, aheadWork - job.workMs);
      const startsInMs = this.waitFrom(--ahead, now, aheadWork);
      if (startsInMs === undefined) break;
      if (job.kind === "client" && job.priority !== true && job.stays !== true)
        out.push({ reqId: job.reqId, request: job.request, startsInMs });
    }
    return out;
  }

  /** Whether our client's job for `reqId` runs now (started, not finished). */
  runsClient(reqId: string): boolean {
    for (const job of this.running.values()) if (job.kind === "client" && job.reqId === reqId) return true;
    return false;
  }

  /** Offload: removes our client's waiting job for `reqId` (false: none waits). */
  takeQueued(reqId: string): boolean {
    for (let i = this.queueHead; i < this.queue.length; i++) {
      const job = this.queue[i] as Job;
      if (job.cancelled || job.kind !== "client" || job.reqId !== reqId) continue;
      job.cancelled = true;
      this.cancelledQueued++;
      this.unqueue(job);
      this.repriceAfter(job);
      this.check();
      return true;
    }
    return false;
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
    for (const job of this.running.values())
      if (job.kind === "client" && job.reqId === reqId) this.abort(job, reason, out);
  }

  /** The running forward with this key was finally cancelled by its origin: aborted if the engine can. */
  abortForward(key: string, out: Effect[]): void {
    for (const job of this.running.values()) if (job.key === key) this.abort(job, "cancelled", out);
  }

  private abort(job: Job, reason: AbortReason, out: Effect[]): void {
    if (!this.config.abortRuns || job.aborting !== undefined) return;
    job.aborting = reason;
    out.push({ type: "abort-run", jobId: job.jobId });
  }

  /** When a job queued now would start (elapsed-aware `waitFrom`; undefined until a run is timed). */
  admissionWaitMs(now: number): number | undefined {
    return this.waitFrom(this.queue.length - this.queueHead - this.cancelledQueued, now, this.queuedWorkMs);
  }

  /** What serving judges an arriving forward by (serving.ts `ServingLoad`). */
  loadNow(now: number): ServingLoad {
    return {
      full: this.full(),
      expectedWaitMs: this.expectedWaitMs(),
      admissionWaitMs: this.admissionWaitMs(now),
    };
  }

  /** The queue bound (`maxQueue`) is reached: refuse more work. */
  full(): boolean {
    return this.queueDepth() >= this.config.maxQueue;
  }

  enqueue(spec: JobSpec, now: number, out: Effect[]): void {
    const job: Job = {
      ...spec,
      jobId: `j${++this.jobSeq}`,
      enqueuedAt: now,
      startedAt: now,
      handle: undefined,
      matched: 0,
      cacheTokens: 0,
      cancelled: false,
      expiresAt: expiry(spec.deadlineMs, now),
      workMs: 0,
      pricedMatch: 0,
      since: spec.since ?? now,
    };
    // A priority job runs ahead of every waiting job that reached us after it.
    const at = job.priority === true ? this.placeOf(job.since) : this.queue.length;
    this.priceJob(job, at);
    this.queuedWorkMs += job.workMs;
    if (at === this.queue.length) this.queue.push(job);
    else if (at === this.queueHead && this.queueHead > 0) this.queue[--this.queueHead] = job;
    else this.queue.splice(at, 0, job);
    if (job.key !== undefined) this.queuedByKey.set(job.key, job);
    this.pump(now, out);
  }

  /**
   * A priority job's place: behind the waiting jobs queued before its request arrived, ahead of the
   * rest. It has waited on timed-out attempts already, so it skips the queue that formed since;
   * but at the head, a burst of them (many losses at once) would starve a request queued before them
   * all, the longest waits of a lossy open loop.
   */
  private placeOf(since: number): number {
    let i = this.queue.length;
    while (i > this.queueHead && (this.queue[i - 1] as Job).since > since) i--;
    return i;
  }

  /** Starts queued jobs while there is a free slot (FIFO; a priority job by its arrival). Algorithm 1 lines 7-11. */
  pump(now: number, out: Effect[]): void {
    const nodeManaged = this.config.cacheMode === "node-managed";
    while (this.running.size < this.config.concurrency && this.queueHead < this.queue.length) {
      const job = this.queue[this.queueHead] as Job;
      this.queue[this.queueHead++] = undefined as unknown as Job;
      if (this.queueHead > 1024 && this.queueHead * 2 > this.queue.length) {
        this.queue.splice(0, this.queueHead);
        this.queueHead = 0;
      }
      if (job.cancelled) {
        this.cancelledQueued--;
        continue;
      }
      this.unqueue(job);
      if (job.key !== undefined) this.queuedByKey.delete(job.key);
      if (now > job.expiresAt) {
        // Checked at admission too (serving.ts), but a queue can slow down after it: no run for nobody.
        this.counters.expiredForwards++;
        this.repriceAfter(job);
        continue;
      }
      job.startedAt = now;
      // The tree holds cache keys: a namespaced request's tokens behind its namespace's pseudo-block.
      const tokens = keyTokens(job.request);
      let evicted: EvictedRun[] = [];
      if (nodeManaged && job.kind === "check") {
        // A spot check keeps nothing: no eviction, and the engine keeps only what was cached.
        const { length, handle } = this.tree_.lock(tokens);
        job.handle = handle;
        job.matched = length;
        job.cacheTokens = length;
      } else if (nodeManaged) {
        const { length, handle } = this.tree_.lock(tokens);
        job.handle = handle;
        job.matched = length;
        const need = tokens.length - length;
        let avail = this.tree_.free() - this.reserved;
        if (need > avail) {
          evicted = this.tree_.evict(need - avail);
          for (const r of evicted) {
            this.counters.evictedTokens += r.path.length - r.keep;
            this.evictedDecayed += r.path.length - r.keep;
          }
          avail = this.tree_.free() - this.reserved;
        }
        // If the prompt cannot fit (capacity, or pinned by concurrent runs) it runs uncached.
        job.cacheTokens = need <= avail ? tokens.length : length;
        this.reserved += job.cacheTokens - length;
      } else {
        job.matched = this.tree_.match(tokens);
        job.cacheTokens = tokens.length;
      }
      this.running.set(job.jobId, job);
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
    const job = this.queuedByKey.get(key);
    if (!job) return false;
    this.queuedByKey.delete(key);
    job.cancelled = true;
    this.cancelledQueued++;
    this.unqueue(job);
    this.repriceAfter(job);
    return true;
  }

  /** The job with this key while it waits (ranMs undefined) or runs (ranMs = how long so far). */
  jobFor(key: string, now: number): { request: EngineRequest; ranMs: number | undefined } | undefined {
    const queued = this.queuedByKey.get(key);
    if (queued) return { request: queued.request, ranMs: undefined };
    for (const job of this.running.values()) {
      if (job.key === key) return { request: job.request, ranMs: now - job.startedAt };
    }
    return undefined;
  }

  /** The engine finished `jobId`; undefined for a job from before a restart. */
  done(jobId: string, result: EngineResult, now: number): Completion | undefined {
    const job = this.running.get(jobId);
    if (!job) return undefined;
    // Algorithm 1 lines 12-13: the tree mirrors what the engine now caches.
    if (this.config.cacheMode === "node-managed") {
      // Tree = engine cache, the cheap form: the hit the engine found is the prefix the tree pinned.
      // Checked runs only: a remote engine the tree approximates (LRU) may report another hit.
      if (this.paranoid)
        invariant(
          result.cachedTokens === promptMatch(job.request, job.matched),
          () =>
            `the engine reused ${result.cachedTokens} cached tokens, the tree held ` +
            `${promptMatch(job.request, job.matched)}`,
        );
      if (job.cacheTokens > job.matched)
        this.tree_.insert(keyTokens(job.request).subarray(0, job.cacheTokens), ++this.tick);
      this.insertedDecayed =
        PRESSURE_DECAY * this.insertedDecayed + Math.max(0, job.cacheTokens - job.matched);
      this.evictedDecayed *= PRESSURE_DECAY;
      this.runsDecayed = PRESSURE_DECAY * this.runsDecayed + 1;
    } else {
      this.tree_.resetTo(result.cachedSequences ?? [], ++this.tick);
    }
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
    this.tree_.resetTo(sequences as Tokens[], ++this.tick);
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
    const n = Math.min(kept, job.cacheTokens);
    if (this.config.cacheMode === "node-managed" && n > job.matched)
      this.tree_.insert(keyTokens(job.request).subarray(0, n), ++this.tick);
    this.finish(job);
    if (sequences !== undefined) this.cacheChanged(sequences);
    this.repriceAfter(job);
    return job;
  }

  /** The engine failed `jobId`; undefined for a job from before a restart. */
  failed(jobId: string): Readonly<JobSpec> | undefined {
    const job = this.running.get(jobId);
    if (!job) return undefined;
    this.counters.engineFailures++;
    this.finish(job);
    // What it would have cached is not: the jobs that counted on it run colder.
    this.repriceAfter(job);
    return job;
  }

  private finish(job: Job): void {
    this.running.delete(job.jobId);
    if (job.handle !== undefined) {
      this.reserved -= job.cacheTokens - job.matched;
      this.tree_.unlock(job.handle);
      job.handle = undefined;
    }
    this.check();
  }

  /**
   * How long a job enqueued now would wait before it starts, from the measured service time
   * (undefined until a run is timed). With every slot busy, the running jobs have half a service
   * time left on average and the waiting ones drain `concurrency` at a time.
   */
  expectedWaitMs(svc = this.costs.serviceMs): number | undefined {
    if (svc === undefined) return undefined;
    const c = this.config.concurrency;
    if (this.running.size < c) return 0;
    const waiting = this.queue.length - this.queueHead - this.cancelledQueued;
    return ((waiting + c / 2) / c) * svc;
  }

  /**
   * When a job for `request` will be answered: the rest of the run if it has run `ranMs`, else the
   * queue wait plus the run.
   */
  etaMs(request: EngineRequest, ranMs?: number): number {
    return ranMs === undefined
      ? (this.expectedWaitMs(this.costs.serviceMs ?? this.learnedCosts().serviceMs) ?? 0) +
          this.serviceFor(request)
      : Math.max(0, this.serviceFor(request) - ranMs);
  }

  /**
   * Expected service time of `request` here: its uncached prefill and the decode of its `maxTokens`,
   * at least the measured mean.
   */
  private serviceFor(request: EngineRequest): number {
    const reused = promptMatch(request, this.tree_.match(keyTokens(request)));
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

  /**
   * Share of what we cache that only displaced something else lately, in [0, 1], and how many runs
   * it takes our runs' new tokens to fill the cache once (its turnover): what rent-or-buy needs to
   * tell a bought prefix that survives until it is asked again from one evicted first.
   */
  eviction(): Eviction {
    const pressure = this.insertedDecayed > 0 ? Math.min(1, this.evictedDecayed / this.insertedDecayed) : 0;
    const perRun = this.runsDecayed > 0 ? this.insertedDecayed / this.runsDecayed : 0;
    return perRun > 0 ? { pressure, turnoverRuns: this.tree_.capacity / perRun } : { pressure };
  }

  /** Executor accounting, O(1): after every change of the queue or the running set. */
  private check(): void {
    invariant(this.running.size <= this.config.concurrency, "more jobs running than slots");
    invariant(this.reserved >= 0, "reserved cache tokens went negative");
    invariant(this.cancelledQueued >= 0 && this.queueDepth() >= this.running.size, "queue accounting broke");
    if (this.config.cacheMode === "node-managed") {
      // Every running job pins its prefix; a finished one has let go of it.
      invariant(this.tree_.locks === this.running.size, "tree locks do not match the running jobs");
      invariant(this.tree_.size + this.reserved <= this.tree_.capacity, "cache over-committed");
    } else invariant(this.reserved === 0, "engine-managed caches reserve nothing");
  }

  /** The walks (`checkInvariants` only): once per engine run, when the tree takes its new contents. */
  private checkWalks(): void {
    let waiting = 0;
    for (let i = this.queueHead; i < this.queue.length; i++) if (!(this.queue[i] as Job).cancelled) waiting++;
    invariant(
      waiting === this.queue.length - this.queueHead - this.cancelledQueued,
      "queue depth miscounted",
    );
    for (const job of this.queuedByKey.values())
      invariant(!job.cancelled, "a cancelled job is still findable");
    // Re-hashing every cached token is the dearest part: every 16th run (a wrong key set persists).
    this.tree_.checkIntegrity(++this.walks % 16 === 1);
  }
}

/** When a job of a forward with `deadlineMs` (peer-controlled: only a finite, non-negative one) expires. */
function expiry(deadlineMs: number | undefined, now: number): number {
  return typeof deadlineMs === "number" && Number.isFinite(deadlineMs) && deadlineMs >= 0
    ? now + deadlineMs
    : Number.POSITIVE_INFINITY;
}

/** Cached sequences are the engine's private business: never ship them to peers or clients. */
function stripCache(r: EngineResult): EngineResult {
  if (r.cachedSequences === undefined) return r;
  const { cachedSequences: _drop, ...rest } = r;
  return rest;
}
