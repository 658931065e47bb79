/**
 * The engine's two cache levels: K slots (sequences of one context) and the saved states they spill
 * to. Chooses the slot for a prompt, spills what it is about to lose and loads a saved state sharing a
 * longer prefix. Counts saves and loads; a failed save or load never fails the request.
 */
import type { LlamaContextSequence, Token } from "node-llama-cpp";
import type { Tokens } from "../../core/engine.js";
import { type NamespaceFields, promptMatch } from "../../core/namespace.js";
import { sameNamespace, taggedKey } from "../namespace-tags.js";
import type { LlamaCppLog } from "./options.js";
import { takeLlamaErrors } from "./runtime.js";
import type { SavedState, StateCache } from "./state-cache.js";

export interface Slot {
  seq: LlamaContextSequence;
  lastUsed: number;
  /** The namespace of the request that computed the slot's content. */
  ns: NamespaceFields;
}

/** A slot's content as its namespace's cache key. */
export function slotKey(s: Slot): Tokens {
  return taggedKey(s.ns, Uint32Array.from(s.seq.contextTokens as number[]));
}

export class SlotCache {
  readonly counts = { saves: 0, saveFailures: 0, loads: 0, loadFailures: 0 };

  constructor(
    readonly slots: Slot[],
    readonly states: StateCache,
    private readonly opts: { slotReuseFraction: number; minSpillTokens: number },
    private readonly log: LlamaCppLog,
  ) {}

  /**
   * Picks the slot: the one sharing the longest prefix when that share is worth taking over the slot,
   * else the least-recently-used slot. "Worth it" = the shared prefix covers at least
   * `slotReuseFraction` of the prompt, or the slot loses almost nothing (it holds a prefix of the
   * prompt). Without this, every prompt would pile onto one slot, since all prompts share BOS (and
   * often a template header). A saved state is loaded into the chosen slot when it shares more than
   * the slot does. Slot contents about to be lost are spilled to the state cache first. Returns the
   * slot and the prefix it now shares with the prompt.
   */
  async prepare(tokens: Token[], ns: NamespaceFields): Promise<{ slot: Slot; shared: number }> {
    // Another namespace's content shares nothing with the prompt, whatever its tokens.
    const shared = (s: Slot) =>
      sameNamespace(s.ns, ns) ? s.seq.compareContextTokens(tokens).firstDifferentIndex : 0;
    let best: Slot | undefined;
    let bestLen = 0;
    for (const s of this.slots) {
      const len = shared(s);
      if (len > bestLen) {
        best = s;
        bestLen = len;
      }
    }
    const worthIt =
      best !== undefined &&
      (bestLen >= this.opts.slotReuseFraction * tokens.length ||
        best.seq.nextTokenIndex - bestLen < this.opts.minSpillTokens);
    const slot = worthIt && best ? best : this.slots.reduce((a, b) => (b.lastUsed < a.lastUsed ? b : a));
    const slotLen = slot === best ? bestLen : shared(slot);
    // States are kept as cache keys: a match counts the namespace's pseudo-block, which reuses nothing.
    const key = taggedKey(ns, Uint32Array.from(tokens as number[]));
    const match = this.states.bestMatch(key);
    const saved = match && { state: match.state, length: promptMatch(ns, match.length) };
    if (saved && saved.length > slotLen) {
      // The spill must not evict the state we are about to load (it used to: LRU picked it).
      await this.spill(slot, 0, saved.state);
      await this.loadState(slot, saved.state);
      // Measured after the load: a failed load leaves the slot empty.
      return { slot, shared: shared(slot) };
    }
    // Spilling saves the slot without changing it: the shared prefix is still slotLen.
    await this.spill(slot, slotLen);
    return { slot, shared: slotLen };
  }

  /**
   * Loads a saved state into a slot. A failed load never fails the request: the state is dropped and
   * the slot is left empty, so the prompt is recomputed. The slot is emptied first because
   * node-llama-cpp forgets the slot's tokens before the native load, which can fail without touching
   * the KV cells: stale cells under a sequence believed empty would corrupt the next evaluation.
   */
  private async loadState(slot: Slot, state: SavedState): Promise<void> {
    await slot.seq.clearHistory();
    try {
      await slot.seq.loadStateFromFile(state.file, { acceptRisk: true });
      slot.ns = state.ns;
      this.counts.loads++;
      this.states.touch(state);
    } catch (e) {
      this.counts.loadFailures++;
      this.states.delete(state);
      const llama = takeLlamaErrors().join("; ");
      this.log("saved state failed to load; recomputing the prompt", {
        file: state.file,
        tokens: state.tokens.length,
        error: (e as Error).message,
        ...(llama ? { llama } : {}),
      });
      if (slot.seq.nextTokenIndex > 0) await slot.seq.clearHistory();
    }
  }

  /**
   * Saves a slot's sequence before all but `keep` of its tokens are dropped, if worth keeping. A failed
   * save only loses that cache entry, never the request. `protect`: see StateCache.add.
   */
  private async spill(slot: Slot, keep: number, protect?: SavedState): Promise<void> {
    const n = slot.seq.nextTokenIndex;
    if (n - keep < this.opts.minSpillTokens) return;
    const tokens = slotKey(slot);
    if (this.states.covers(tokens)) return;
    try {
      const added = await this.states.add(
        tokens,
        async (file) => {
          await slot.seq.saveStateToFile(file);
        },
        protect,
        slot.ns,
      );
      if (added) this.counts.saves++;
    } catch (e) {
      this.counts.saveFailures++;
      this.log("saving a slot's state failed; its tokens leave the cache", {
        tokens: tokens.length,
        error: (e as Error).message,
      });
    }
  }
}
