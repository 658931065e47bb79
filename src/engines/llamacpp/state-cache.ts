/**
 * The second-level prefix cache: sequence states saved to files (tmpfs when available), bounded by
 * count and bytes with LRU eviction. A state holds the KV of one token sequence; loading it into a
 * slot restores that prefix in ~ms instead of re-running prefill. Only valid for contexts with the
 * same model, sequence count and flash-attention setting, which is why the directory is private to
 * one engine instance and removed on close.
 */
import { rmSync, statSync } from "node:fs";
import { join } from "node:path";
import type { NamespaceFields } from "../../core/namespace.js";
import { DEFAULT_NAMESPACE } from "../namespace-tags.js";

export interface SavedState {
  /** The state's cache key: its tokens behind its namespace's pseudo-block (`keyTokens`). */
  tokens: Uint32Array;
  /** The namespace of the request that computed it. */
  ns: NamespaceFields;
  file: string;
  bytes: number;
  lastUsed: number;
}

export interface StateCacheLimits {
  maxStates: number;
  maxBytes: number;
}

/** Length of the common prefix of two token sequences. */
export function commonPrefix(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

export class StateCache {
  private readonly states: SavedState[] = [];
  private counter = 0;
  private clock = 0;

  constructor(
    readonly dir: string,
    readonly limits: StateCacheLimits,
  ) {}

  get entries(): readonly SavedState[] {
    return this.states;
  }

  get totalBytes(): number {
    return this.states.reduce((s, e) => s + e.bytes, 0);
  }

  /** The saved state sharing the longest prefix with `tokens`. */
  bestMatch(tokens: ArrayLike<number>): { state: SavedState; length: number } | undefined {
    let best: { state: SavedState; length: number } | undefined;
    for (const state of this.states) {
      const length = commonPrefix(state.tokens, tokens);
      if (length > 0 && (!best || length > best.length)) best = { state, length };
    }
    return best;
  }

  /** True when some saved state already holds all of `tokens` (so saving them again is pointless). */
  covers(tokens: ArrayLike<number>): boolean {
    return this.states.some(
      (s) => s.tokens.length >= tokens.length && commonPrefix(s.tokens, tokens) === tokens.length,
    );
  }

  touch(state: SavedState): void {
    state.lastUsed = ++this.clock;
  }

  /**
   * Saves via `save(file)`, drops states the new one makes redundant, then enforces the limits.
   * `protect` (the state about to be loaded into the slot being spilled) is never removed: evicting it
   * here deleted its file right before `loadStateFromFile` read it. When only protected room is left,
   * nothing is saved. A failed save leaves no file behind and rethrows.
   */
  async add(
    tokens: Uint32Array,
    save: (file: string) => Promise<void>,
    protect?: SavedState,
    ns: NamespaceFields = DEFAULT_NAMESPACE,
  ): Promise<SavedState | undefined> {
    const isProtected = (s: SavedState) => s === protect && this.states.includes(s);
    if (this.limits.maxStates - (protect && isProtected(protect) ? 1 : 0) <= 0) return undefined;
    const file = join(this.dir, `state-${++this.counter}.bin`);
    try {
      await save(file);
    } catch (e) {
      rmSync(file, { force: true });
      throw e;
    }
    const state: SavedState = { tokens, ns, file, bytes: statSync(file).size, lastUsed: ++this.clock };
    // A saved state whose tokens are a prefix of the new one is fully covered by it.
    for (let i = this.states.length - 1; i >= 0; i--) {
      const s = this.states[i]!;
      if (
        !isProtected(s) &&
        s.tokens.length <= tokens.length &&
        commonPrefix(s.tokens, tokens) === s.tokens.length
      )
        this.remove(i);
    }
    this.states.push(state);
    this.enforce(protect);
    return this.states.includes(state) ? state : undefined;
  }

  /** Drops one state (e.g. its file failed to load) and deletes its file. */
  delete(state: SavedState): void {
    const i = this.states.indexOf(state);
    if (i >= 0) this.remove(i);
  }

  /** Evicts least-recently-used states, never `protect`, until the count and byte limits hold. */
  private enforce(protect?: SavedState): void {
    const over = () => this.states.length > this.limits.maxStates || this.totalBytes > this.limits.maxBytes;
    while (over()) {
      let lru = -1;
      this.states.forEach((s, i) => {
        if (s !== protect && (lru < 0 || s.lastUsed < this.states[lru]!.lastUsed)) lru = i;
      });
      if (lru < 0) return; // only the protected state is left
      this.remove(lru);
    }
  }

  private remove(i: number): void {
    const [s] = this.states.splice(i, 1);
    if (s) rmSync(s.file, { force: true });
  }

  clear(): void {
    while (this.states.length > 0) this.remove(0);
  }
}
