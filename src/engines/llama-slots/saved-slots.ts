/**
 * Slot states the node saved to the llama.cpp server's `--slot-save-path` (`POST /slots/{id}?action=
 * save|restore`): the second-level cache the embedded engine keeps in its own files
 * (src/engines/llamacpp/state-cache.ts), here on the server's disk. The server cannot delete a file,
 * so the index reuses a fixed set of file names: at most `maxStates` files ever exist, and evicting a
 * state (least recently used) frees its name for the next save.
 */
import { invariant } from "../../core/invariant.js";
import type { NamespaceFields } from "../../core/namespace.js";
import { DEFAULT_NAMESPACE, sameNamespace, taggedKey } from "../namespace-tags.js";
import { knownPrefix, lcp } from "./tokens.js";

export interface SavedSlot {
  tokens: Uint32Array;
  /** The namespace of the request that computed it: only that namespace's requests restore it. */
  ns: NamespaceFields;
  filename: string;
  lastUsed: number;
}

export class SavedSlots {
  private readonly states: SavedSlot[] = [];
  private clock = 0;

  constructor(
    readonly maxStates: number,
    /** File names are `<prefix>-<n>.bin`: one prefix per node, so nodes sharing a server never collide. */
    private readonly prefix: string,
  ) {
    invariant(maxStates >= 1, "saved slots need room for one state");
  }

  get entries(): readonly SavedSlot[] {
    return this.states;
  }

  /** The saved state of namespace `ns` sharing the longest prefix with `prompt` (and that length). */
  best(
    prompt: Uint32Array,
    ns: NamespaceFields = DEFAULT_NAMESPACE,
  ): { state: SavedSlot; length: number } | undefined {
    let out: { state: SavedSlot; length: number } | undefined;
    for (const state of this.states) {
      if (!sameNamespace(state.ns, ns)) continue;
      const length = lcp(state.tokens, prompt);
      if (length > 0 && (!out || length > out.length)) out = { state, length };
    }
    return out;
  }

  /** True when a saved state of namespace `ns` already holds every known token of `tokens`. */
  covers(tokens: Uint32Array, ns: NamespaceFields = DEFAULT_NAMESPACE): boolean {
    const k = knownPrefix(tokens);
    return this.states.some((s) => sameNamespace(s.ns, ns) && lcp(s.tokens, k) === k.length);
  }

  /** The file name the next save goes to: a free one, else the least recently used state's. */
  nextFile(): string {
    for (let i = 0; i < this.maxStates; i++) {
      const name = `${this.prefix}-${i}.bin`;
      if (!this.states.some((s) => s.filename === name)) return name;
    }
    let lru = this.states[0]!;
    for (const s of this.states) if (s.lastUsed < lru.lastUsed) lru = s;
    return lru.filename;
  }

  /**
   * `filename` now holds `tokens` of namespace `ns`, UNKNOWN_TOKEN included (a restore gives the slot
   * all of them); whatever the file held before is gone, and states the new one covers are dropped.
   */
  saved(filename: string, tokens: Uint32Array, ns: NamespaceFields = DEFAULT_NAMESPACE): void {
    const k = knownPrefix(tokens);
    for (let i = this.states.length - 1; i >= 0; i--) {
      const s = this.states[i]!;
      const covered = sameNamespace(s.ns, ns) && lcp(s.tokens, k) === s.tokens.length;
      if (s.filename === filename || covered) this.states.splice(i, 1);
    }
    this.states.push({ tokens: tokens.slice(), ns, filename, lastUsed: ++this.clock });
    invariant(this.states.length <= this.maxStates, "more saved slot states than files");
  }

  touch(state: SavedSlot): void {
    state.lastUsed = ++this.clock;
  }

  drop(state: SavedSlot): void {
    const i = this.states.indexOf(state);
    if (i >= 0) this.states.splice(i, 1);
  }

  /** The states as cache keys of their namespaces. */
  sequences(): Uint32Array[] {
    const out: Uint32Array[] = [];
    for (const s of this.states) {
      const k = knownPrefix(s.tokens);
      if (k.length > 0) out.push(taggedKey(s.ns, k));
    }
    return out;
  }
}
