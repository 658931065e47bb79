/**
 * llama.cpp server's RAM prompt cache (`--cache-ram`, `server_prompt_cache` in tools/server/
 * server-task.cpp), modelled rule for rule so the node knows which prompt a slot restores from it.
 *
 * States are kept oldest first. `save` is `alloc`: a prompt already contained in a state is not saved;
 * states contained in the new prompt are dropped; the oldest go while the byte limit would be passed.
 * `load` restores the state that beats the slot's own prompt in both kept share (f_keep, at least 0.25)
 * and prompt share (f_sim), first such state from the front, and takes it out of the cache. `update`
 * drops the oldest states beyond the byte limit, then beyond the token limit (the server's total
 * context, raised to what the byte limit fits at the cache's mean bytes per token).
 *
 * Sizes: the server counts each state's KV bytes. The model counts `bytesPerToken × tokens`; without
 * a figure (`bytesPerToken` undefined) the byte limit and the raise it allows are taken as never
 * reached (exact while the cache holds less than the limit).
 */
import type { NamespaceFields } from "../../core/namespace.js";
import { DEFAULT_NAMESPACE } from "../namespace-tags.js";
import { f32, lcp } from "./tokens.js";

export interface PromptCacheLimits {
  /** `--cache-ram` in MiB: -1 no limit, > 0 the limit (0 means no cache: do not build one). */
  ramMiB: number;
  /** The server's total context (`-c`): the token limit before the byte-limit raise. */
  totalContextTokens: number;
  /** KV bytes per cached token, when known. */
  bytesPerToken?: number | undefined;
}

export interface CachedPrompt {
  tokens: Uint32Array;
  /** The namespace of the request that computed it (the server compares tokens only). */
  ns: NamespaceFields;
}

export class PromptCacheModel {
  /** Oldest first, as the server's std::list. */
  readonly states: CachedPrompt[] = [];
  private readonly limitBytes: number;

  constructor(private readonly limits: PromptCacheLimits) {
    this.limitBytes = limits.ramMiB < 0 ? 0 : limits.ramMiB * 1024 * 1024;
  }

  private bytes(n: number): number {
    return this.limits.bytesPerToken === undefined ? 0 : n * this.limits.bytesPerToken;
  }

  private size(): number {
    let s = 0;
    for (const st of this.states) s += this.bytes(st.tokens.length);
    return s;
  }

  private tokens(): number {
    let n = 0;
    for (const st of this.states) n += st.tokens.length;
    return n;
  }

  /** `prompt_save` → `alloc`: what the server keeps of a slot's prompt. */
  save(prompt: Uint32Array, ns: NamespaceFields = DEFAULT_NAMESPACE): void {
    if (prompt.length === 0) return;
    for (const st of this.states) if (lcp(st.tokens, prompt) === prompt.length) return;
    const need = this.bytes(prompt.length);
    if (this.limitBytes > 0 && need > this.limitBytes) return;
    for (let i = 0; i < this.states.length; ) {
      const st = this.states[i]!;
      if (lcp(st.tokens, prompt) === st.tokens.length) this.states.splice(i, 1);
      else i++;
    }
    if (this.limitBytes > 0)
      while (this.states.length > 0 && this.size() + need > this.limitBytes) this.states.shift();
    this.states.push({ tokens: prompt.slice(), ns });
  }

  /**
   * `load`: the state the server would restore into a slot holding `current` for `prompt`, removed
   * from the cache; undefined when the slot keeps its own prompt.
   */
  load(current: Uint32Array, prompt: Uint32Array): Uint32Array | undefined {
    return this.loadState(current, prompt)?.tokens;
  }

  /** `load`, with the restored state's namespace. */
  loadState(current: Uint32Array, prompt: Uint32Array): CachedPrompt | undefined {
    const base = lcp(current, prompt);
    let keepBest = current.length > 0 ? f32(base / current.length) : -1;
    let simBest = f32(base / prompt.length);
    let best = -1;
    for (let i = 0; i < this.states.length; i++) {
      const st = this.states[i]!.tokens;
      const n = lcp(st, prompt);
      const keep = f32(n / st.length);
      const sim = f32(n / prompt.length);
      if (keep < 0.25) continue;
      if (keepBest < keep && simBest < sim) {
        keepBest = keep;
        simBest = sim;
        best = i;
      }
    }
    if (best < 0) return undefined;
    const [st] = this.states.splice(best, 1);
    return st;
  }

  /** `update`: the byte limit, then the token limit (raised to what the bytes allow). */
  update(): void {
    if (this.limitBytes > 0)
      while (this.states.length > 0 && this.size() > this.limitBytes) this.states.shift();
    const limitTokens = this.limits.totalContextTokens;
    let limitCur = limitTokens;
    if (this.limitBytes > 0) {
      if (this.limits.bytesPerToken === undefined) return;
      const perToken = Math.max(1, f32(this.size() / Math.max(1, this.tokens())));
      limitCur = Math.max(limitTokens, Math.floor(this.limitBytes / perToken));
    }
    if (limitTokens > 0) while (this.states.length > 0 && this.tokens() > limitCur) this.states.shift();
  }

  /** A copy to try a request on (states are never mutated in place, so they are shared). */
  clone(): PromptCacheModel {
    const c = new PromptCacheModel(this.limits);
    c.states.push(...this.states);
    return c;
  }
}
