/**
 * The exact tree that mirrors the engine's cache (the paper's Trie_i), as runs use it: a starting
 * run pins its matched prefix and evicts until its uncached part fits (Algorithm 1 lines 7–10),
 * reserving that room while it runs; an ending one caches what the engine now holds (lines 12–13).
 * It tracks the eviction pressure rent-or-buy discounts by. The executor decides when; this file
 * keeps the tree, the reservations and the pressure consistent.
 */
import type { EngineResult, EvictedRun, Tokens } from "../../engine.js";
import { invariant } from "../../invariant.js";
import { keyTokens, promptMatch } from "../../namespace.js";
import { RadixTree } from "../../radix-tree.js";
import type { NodeConfig } from "../config.js";
import type { Eviction } from "../demand.js";
import type { Job } from "./jobs.js";

/** Per engine run: eviction pressure remembers ≈ 50 runs. */
const PRESSURE_DECAY = 0.98;

export class RunCache {
  private tree_!: RadixTree;
  /** Tokens promised to running jobs (concurrency > 1) so they cannot over-commit the capacity. */
  private reserved_ = 0;
  /** Logical LRU clock for the tree: strictly increasing per insert. */
  private tick = 0;
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

  constructor(private readonly config: NodeConfig) {
    this.reset();
  }

  /** A crash-restart: the cache is empty and nothing is reserved (the LRU clock and pressure stay). */
  reset(): void {
    this.tree_ = new RadixTree({ capacity: this.config.capacityTokens });
    this.reserved_ = 0;
  }

  get tree(): RadixTree {
    return this.tree_;
  }

  /** Tokens reserved for running jobs. */
  get reserved(): number {
    return this.reserved_;
  }

  private nodeManaged(): boolean {
    return this.config.cacheMode === "node-managed";
  }

  /**
   * `job` starts: it pins its match (node-managed) and what it needs is evicted and reserved; sets
   * its `handle`, `matched` and `cacheTokens`. Returns the runs evicted (the engine frees the same).
   */
  start(job: Job): EvictedRun[] {
    // The tree holds cache keys: a namespaced request's tokens behind its namespace's pseudo-block.
    const tokens = keyTokens(job.request);
    let evicted: EvictedRun[] = [];
    if (this.nodeManaged() && job.kind === "check") {
      // A spot check keeps nothing: no eviction, and the engine keeps only what was cached.
      const { length, handle } = this.tree_.lock(tokens);
      job.handle = handle;
      job.matched = length;
      job.cacheTokens = length;
    } else if (this.nodeManaged()) {
      const { length, handle } = this.tree_.lock(tokens);
      job.handle = handle;
      job.matched = length;
      const need = tokens.length - length;
      let avail = this.tree_.free() - this.reserved_;
      if (need > avail) {
        evicted = this.tree_.evict(need - avail);
        for (const r of evicted) this.evictedDecayed += r.path.length - r.keep;
        avail = this.tree_.free() - this.reserved_;
      }
      // If the prompt cannot fit (capacity, or pinned by concurrent runs) it runs uncached.
      job.cacheTokens = need <= avail ? tokens.length : length;
      this.reserved_ += job.cacheTokens - length;
    } else {
      job.matched = this.tree_.match(tokens);
      job.cacheTokens = tokens.length;
    }
    return evicted;
  }

  /** `job` ran to its end: the tree takes what the engine caches now (Algorithm 1 lines 12-13). */
  done(job: Job, result: EngineResult, paranoid: boolean): void {
    if (this.nodeManaged()) {
      // Tree = engine cache, the cheap form: the hit the engine found is the prefix the tree pinned.
      // Checked runs only: a remote engine the tree approximates (LRU) may report another hit.
      if (paranoid)
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
  }

  /** `job` was aborted keeping `kept` tokens of its key (node-managed; within what it reserved). */
  keep(job: Job, kept: number): void {
    const n = Math.min(kept, job.cacheTokens);
    if (this.nodeManaged() && n > job.matched)
      this.tree_.insert(keyTokens(job.request).subarray(0, n), ++this.tick);
  }

  /** An engine-managed cache's contents now. */
  resetTo(sequences: readonly Tokens[]): void {
    this.tree_.resetTo(sequences as Tokens[], ++this.tick);
  }

  /** `job` ended (any way): its pin and reservation go. */
  release(job: Job): void {
    if (job.handle !== undefined) {
      this.reserved_ -= job.cacheTokens - job.matched;
      this.tree_.unlock(job.handle);
      job.handle = undefined;
    }
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

  /** The cache's O(1) accounting with `running` jobs. */
  check(running: number): void {
    if (this.nodeManaged()) {
      // Every running job pins its prefix; a finished one has let go of it.
      invariant(this.tree_.locks === running, "tree locks do not match the running jobs");
      invariant(this.tree_.size + this.reserved_ <= this.tree_.capacity, "cache over-committed");
    } else invariant(this.reserved_ === 0, "engine-managed caches reserve nothing");
  }

  /** The tree's walk: re-hashing every cached token is the dearest part, so every 16th call. */
  checkWalk(): void {
    // A wrong key set persists: sampling it still finds it.
    this.tree_.checkIntegrity(++this.walks % 16 === 1);
  }
}
