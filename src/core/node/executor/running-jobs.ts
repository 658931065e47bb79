/**
 * The executor's slots: the jobs started and not yet finished (Algorithm 1's runs in flight), what
 * their elapsed runs say of when a slot frees and how many jobs a held engine stands for, and the
 * aborts asked of them. It owns the running jobs only: executor.ts starts and finishes them.
 */
import type { AbortReason } from "../abort-runs.js";
import type { NodeConfig } from "../config.js";
import type { Effect } from "../types.js";
import type { Job } from "./jobs.js";

/** Most jobs a held engine adds to the depth peers are told (a wire field: bounded). */
const MAX_HELD_JOBS = 100_000;
/** A run counts as holding the engine once it has run this many mean service times. */
const HELD_AFTER_SERVICES = 8;

export class RunningJobs {
  private readonly jobs = new Map<string, Job>();

  constructor(private readonly config: NodeConfig) {}

  /** Jobs running now. */
  get size(): number {
    return this.jobs.size;
  }

  /** A crash-restart: every run is gone. */
  clear(): void {
    this.jobs.clear();
  }

  get(jobId: string): Job | undefined {
    return this.jobs.get(jobId);
  }

  values(): IterableIterator<Job> {
    return this.jobs.values();
  }

  /** `job` took a slot. */
  add(job: Job): void {
    this.jobs.set(job.jobId, job);
  }

  /** `job` left its slot (done, failed or aborted). */
  delete(job: Job): void {
    this.jobs.delete(job.jobId);
  }

  /** Whether our client's job for `reqId` runs now (started, not finished). */
  runsClient(reqId: string): boolean {
    for (const job of this.jobs.values()) if (job.kind === "client" && job.reqId === reqId) return true;
    return false;
  }

  /** The running job with this key, if any. */
  withKey(key: string): Job | undefined {
    for (const job of this.jobs.values()) if (job.key === key) return job;
    return undefined;
  }

  /** Our client's running job for `reqId` goes unanswered: its run is aborted if the engine can. */
  abortClient(reqId: string, reason: AbortReason, out: Effect[]): void {
    for (const job of this.jobs.values())
      if (job.kind === "client" && job.reqId === reqId) this.abort(job, reason, out);
  }

  /** The running forward with this key was finally cancelled by its origin: aborted if the engine can. */
  abortForward(key: string, out: Effect[]): void {
    for (const job of this.jobs.values()) if (job.key === key) this.abort(job, "cancelled", out);
  }

  private abort(job: Job, reason: AbortReason, out: Effect[]): void {
    if (!this.config.abortRuns || job.aborting !== undefined) return;
    job.aborting = reason;
    out.push({ type: "abort-run", jobId: job.jobId });
  }

  /**
   * The jobs held runs count as beyond themselves (the executor's `reportedDepth`), at the mean
   * service time `svc`; 0 without offload.
   */
  heldJobs(now: number, svc: number | undefined): number {
    if (!this.config.offload || svc === undefined || !(svc > 0)) return 0;
    let held = 0;
    for (const job of this.jobs.values()) {
      const ran = now - job.startedAt;
      // Only a run far past the mean: a cold start's long prefills keep the plain depth.
      if (ran >= HELD_AFTER_SERVICES * svc) held += Math.floor(ran / svc) - 1;
    }
    return Math.min(held, MAX_HELD_JOBS);
  }

  /**
   * The wait of a job queued behind `queued` waiting ones, at the mean service time `svc`: with every
   * slot busy, the running jobs have half a service time left on average and the waiting ones drain
   * `concurrency` at a time; held runs (`heldJobs`, at `heldSvc`) count as the jobs they stand for.
   */
  waitBehind(queued: number, now: number, svc: number, heldSvc: number | undefined): number {
    const c = this.config.concurrency;
    if (this.jobs.size < c) return 0;
    const waiting = queued + this.heldJobs(now, heldSvc);
    return ((waiting + c / 2) / c) * svc;
  }

  /**
   * When the job `ahead` places behind the running ones would start, at the mean service time `svc`.
   * A running job has half its service left on average while younger than it; one that has run
   * longer is expected to run as long again (a long generation shows itself only by running long).
   * `aheadWorkMs` (priced waits): the priced runs of the jobs ahead, instead of `ahead` × the mean.
   */
  startsIn(ahead: number, now: number, svc: number, aheadWorkMs: number | undefined): number {
    const c = this.config.concurrency;
    if (this.jobs.size + ahead < c) return 0;
    const work = aheadWorkMs !== undefined;
    let soonest = Number.POSITIVE_INFINITY;
    for (const job of this.jobs.values()) {
      const ran = now - job.startedAt;
      // Priced jobs: what is left of their own expected run (overrunning ones: as long again).
      const own = work && job.workMs > 0 ? job.workMs : svc;
      const floor = work && job.workMs > 0 ? own - ran : Math.max(svc / 2, svc - ran);
      soonest = Math.min(soonest, ran < own ? floor : ran);
    }
    if (this.jobs.size < c) soonest = 0;
    if (aheadWorkMs !== undefined) return soonest + aheadWorkMs / c;
    return soonest + Math.floor(ahead / c) * svc;
  }
}
