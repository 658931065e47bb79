/**
 * The llama.cpp server's cache as the node knows it: each slot's tokens and the RAM prompt cache,
 * changed by the same rules as the server (tools/server/server-context.cpp), because the node chooses
 * the slot of every request (`id_slot`) and sees what it computed.
 *
 * A request for slot s with prompt P (`launch`):
 *  1. slot choice (`get_available_slot` with `id_slot`): the slot's share of P is its common prefix
 *     over |P| (float), kept when above `similarity`; its kept share is that share × |P| / |slot|.
 *     With a RAM cache and a kept share below 0.5 (an empty slot's is NaN: not below), the slot's
 *     prompt is saved to the cache and the best cached prompt for P restored into it.
 *  2. every other idle slot is saved to the cache (`--cache-idle-slots`, on with a cache), and
 *     cleared with a unified KV cache.
 *  3. the cached prefix is the slot's common prefix with P, one less when that is all of P (the server
 *     evaluates at least one token): the server reports it as `cache_n` / `cached_tokens`.
 * When the request ends (`finish`) the slot holds P and the generated tokens it evaluated: all but
 * the last one (`tokens_cached` says how many); tokens the stream did not show are UNKNOWN_TOKEN.
 *
 * Namespaces (tenants' `cache_salt`, adapters): the server compares tokens only, so the mirror tags
 * every slot and RAM-cache prompt with the namespace of the request that computed it. A request
 * reuses the content its slot holds when it starts (a RAM-cache restore included) only when that
 * content is its own namespace's (`reuses`); otherwise the node sends it with `cache_prompt: false`,
 * the server then reuses nothing (n_past = 0) and reports 0 cached tokens. `sequences` reports each
 * tagged content as its namespace's cache key (`keyTokens`).
 *
 * Not modelled (predictions may then be wrong, and the accuracy figures show it): `--cache-reuse`
 * (KV shifting), sliding-window and recurrent models (context checkpoints), multimodal prompts,
 * LoRA adapters per request, and a server that served requests the node did not send.
 */
import { invariant } from "../../core/invariant.js";
import type { NamespaceFields } from "../../core/namespace.js";
import { DEFAULT_NAMESPACE, sameNamespace, taggedKey } from "../namespace-tags.js";
import { PromptCacheModel } from "./prompt-cache.js";
import { f32, knownPrefix, lcp, UNKNOWN_TOKEN } from "./tokens.js";

export interface SlotServerConfig {
  /** `-np`. */
  slots: number;
  /** `--slot-prompt-similarity` (server default 0.1). */
  similarity: number;
  /** `--cache-ram` in MiB (server default 8192; 0: no RAM cache; -1: no byte limit). */
  cacheRamMiB: number;
  /** `--cache-idle-slots` (server default on; needs the RAM cache). */
  cacheIdleSlots: boolean;
  /** `--kv-unified` (default off with an explicit `-np`). */
  kvUnified: boolean;
  /** `-c`: all slots' context together. */
  totalContextTokens: number;
  /** KV bytes per token, when known (for the RAM cache's byte limit). */
  bytesPerToken?: number | undefined;
}

/** What a request on one slot will find: the prefix the server will report as cached. */
export interface SlotPlan {
  slot: number;
  predicted: number;
}

export interface MirrorState {
  slots: Uint32Array[];
  slotNs: NamespaceFields[];
  lastUsed: number[];
  cache: PromptCacheModel | undefined;
}

export class SlotMirror {
  private readonly slots: Uint32Array[];
  /** The namespace of the request that computed each slot's content. */
  private readonly slotNs: NamespaceFields[];
  /** Our clock of each slot's last use: the tie-break between equal slots (least recently used). */
  private readonly lastUsed: number[];
  private clock = 0;
  private cache: PromptCacheModel | undefined;
  /** +1 on every change of what a prompt can match. */
  version = 0;

  constructor(readonly config: SlotServerConfig) {
    invariant(config.slots >= 1, "a llama.cpp server has at least one slot");
    this.slots = Array.from({ length: config.slots }, () => new Uint32Array(0));
    this.slotNs = new Array<NamespaceFields>(config.slots).fill(DEFAULT_NAMESPACE);
    this.lastUsed = new Array<number>(config.slots).fill(0);
    this.cache = this.newCache();
  }

  private newCache(): PromptCacheModel | undefined {
    const c = this.config;
    return c.cacheRamMiB === 0
      ? undefined
      : new PromptCacheModel({
          ramMiB: c.cacheRamMiB,
          totalContextTokens: c.totalContextTokens,
          bytesPerToken: c.bytesPerToken,
        });
  }

  /**
   * The slot for `prompt` (of namespace `ns`) among `free` ones: the most cached tokens it may reuse
   * (its own namespace's only), then the least recently used.
   */
  choose(prompt: Uint32Array, free: readonly number[], ns: NamespaceFields = DEFAULT_NAMESPACE): SlotPlan {
    invariant(free.length > 0, "choose needs a free slot");
    let best: SlotPlan | undefined;
    for (const slot of free) {
      const predicted = this.predict(slot, prompt, free, undefined, ns);
      if (
        !best ||
        predicted > best.predicted ||
        (predicted === best.predicted && this.lastUsed[slot]! < this.lastUsed[best.slot]!)
      )
        best = { slot, predicted };
    }
    return best!;
  }

  /**
   * What the server will report as cached for `prompt` of namespace `ns` on `slot` (nothing changes):
   * 0 when the slot's content then is another namespace's (the node sends no `cache_prompt`); with
   * `content`, as if the slot held that instead (a saved state of `ns` restored into it first).
   */
  predict(
    slot: number,
    prompt: Uint32Array,
    idle: readonly number[] = [],
    content?: Uint32Array,
    ns: NamespaceFields = DEFAULT_NAMESPACE,
  ): number {
    const cache = this.cache?.clone();
    const held = this.slots[slot]!;
    const heldNs = this.slotNs[slot]!;
    if (content) {
      this.slots[slot] = content;
      this.slotNs[slot] = ns;
    }
    try {
      const r = this.select(slot, prompt, cache, idle);
      return sameNamespace(r.ns, ns) ? cachedPrefix(r.tokens, prompt) : 0;
    } finally {
      this.slots[slot] = held;
      this.slotNs[slot] = heldNs;
    }
  }

  /**
   * Whether `prompt` of namespace `ns` may reuse what `slot` holds when it starts (after the server's
   * slot choice and any RAM-cache restore): only its own namespace's content. `guarded`: the RAM
   * cache holds prompts the mirror does not know (the server ran requests before the node), so also
   * only when the server will not touch the RAM cache for this start (it may restore anything).
   * `maybeSaved`: slots whose runs may end (and be saved to the RAM cache) before this start.
   */
  reuses(
    slot: number,
    prompt: Uint32Array,
    idle: readonly number[],
    ns: NamespaceFields,
    guarded = false,
    maybeSaved: readonly number[] = [],
  ): boolean {
    const r = this.select(slot, prompt, this.cache?.clone(), idle);
    if (!sameNamespace(r.ns, ns) || (guarded && r.cacheUpdated)) return false;
    if (maybeSaved.length === 0 || !this.cache || !r.cacheUpdated) return true;
    // Runs still going on other slots may have ended at the server, and been saved to its RAM cache,
    // before this one starts: own content under that hypothesis too.
    const alt = this.cache.clone();
    for (const o of maybeSaved) {
      alt.save(this.slots[o]!, this.slotNs[o]);
      alt.update();
    }
    return sameNamespace(this.select(slot, prompt, alt, idle).ns, ns);
  }

  /**
   * `slot` turned out to be idle when another request started (its end crossed that start): the
   * server saved it to the RAM cache then (`--cache-idle-slots`), as it does every idle slot.
   */
  idleSaved(slot: number): void {
    const c = this.config;
    if (!this.cache || !c.cacheIdleSlots) return;
    this.cache.save(this.slots[slot]!, this.slotNs[slot]);
    this.cache.update();
    if (c.kvUnified) this.slots[slot] = new Uint32Array(0);
    this.version++;
  }

  /** The tokens `slot` holds (UNKNOWN_TOKEN where not known). */
  slotTokens(slot: number): Uint32Array {
    return this.slots[slot]!;
  }

  /** The namespace of the content `slot` holds. */
  slotNamespace(slot: number): NamespaceFields {
    return this.slotNs[slot]!;
  }

  /**
   * A saved state was restored into `slot` (`POST /slots/{id}?action=restore`): it holds `tokens`,
   * computed by a request of namespace `ns`.
   */
  restore(slot: number, tokens: Uint32Array, ns: NamespaceFields = DEFAULT_NAMESPACE): void {
    this.slots[slot] = tokens.slice();
    this.slotNs[slot] = ns;
    this.version++;
  }

  /**
   * The server started `prompt` of namespace `ns` on `slot` (its response began): its slot choice and
   * idle-slot saves happen now. `idle`: the slots with no request running, `slot` included. `reuse`:
   * whether it was sent with `cache_prompt: true` (else the server reuses nothing). Returns the
   * prediction.
   */
  launch(
    slot: number,
    prompt: Uint32Array,
    idle: readonly number[],
    ns: NamespaceFields = DEFAULT_NAMESPACE,
    reuse = true,
  ): number {
    const { tokens } = this.select(slot, prompt, this.cache, idle);
    const predicted = reuse ? cachedPrefix(tokens, prompt) : 0;
    // The slot now computes the prompt after its cached prefix: its content is ns's.
    this.slots[slot] = prompt.slice();
    this.slotNs[slot] = ns;
    this.lastUsed[slot] = ++this.clock;
    this.version++;
    return predicted;
  }

  /**
   * The request on `slot` ended: the slot holds `tokensCached` tokens, the prompt then the generated
   * tokens (those in `generated` as far as they go, unknown beyond).
   */
  finish(slot: number, prompt: Uint32Array, generated: ArrayLike<number>, tokensCached: number): void {
    const out = new Uint32Array(Math.max(0, tokensCached));
    const fromPrompt = Math.min(prompt.length, out.length);
    out.set(prompt.subarray(0, fromPrompt));
    for (let i = fromPrompt; i < out.length; i++) {
      const g = i - prompt.length;
      out[i] = g >= 0 && g < generated.length ? generated[g]! : UNKNOWN_TOKEN;
    }
    this.slots[slot] = out;
    this.version++;
  }

  /**
   * What `GET /slots` says each slot holds (token counts): a slot whose count differs from ours keeps
   * the tokens we know up to that count, unknown beyond.
   */
  resync(lengths: readonly (number | undefined)[]): boolean {
    let changed = false;
    lengths.forEach((n, slot) => {
      if (n === undefined || slot >= this.slots.length) return;
      const cur = this.slots[slot]!;
      if (cur.length === n) return;
      const out = new Uint32Array(n).fill(UNKNOWN_TOKEN);
      out.set(cur.subarray(0, Math.min(n, cur.length)));
      this.slots[slot] = out;
      changed = true;
    });
    if (changed) this.version++;
    return changed;
  }

  /** The state now, to go back to when a request the mirror started never reached the server. */
  save(): MirrorState {
    return {
      slots: [...this.slots],
      slotNs: [...this.slotNs],
      lastUsed: [...this.lastUsed],
      cache: this.cache?.clone(),
    };
  }

  /** Back to `state` (it holds a clone of the RAM cache; slots are replaced whole, never changed in place). */
  undo(state: MirrorState): void {
    for (let i = 0; i < this.slots.length; i++) {
      this.slots[i] = state.slots[i]!;
      this.slotNs[i] = state.slotNs[i]!;
      this.lastUsed[i] = state.lastUsed[i]!;
    }
    this.cache = state.cache;
    this.version++;
  }

  /** An independent copy (slots and cached prompts are never changed in place, so they are shared). */
  clone(): SlotMirror {
    const m = new SlotMirror(this.config);
    m.undo(this.save());
    m.clock = this.clock;
    return m;
  }

  /**
   * Whether `other` holds the same slots and the same RAM cache, in the same order (worlds.ts merges
   * such worlds). `lastUsed` is not compared: launches reach every world alike, so worlds never differ in it.
   */
  sameAs(other: SlotMirror): boolean {
    const a = this.cache?.states ?? [];
    const b = other.cache?.states ?? [];
    if (a.length !== b.length) return false;
    const same = (x: Uint32Array, y: Uint32Array) =>
      x === y || (x.length === y.length && x.every((t, i) => t === y[i]));
    for (let i = 0; i < a.length; i++)
      if (!same(a[i]!.tokens, b[i]!.tokens) || !sameNamespace(a[i]!.ns, b[i]!.ns)) return false;
    return this.slots.every(
      (t, i) => same(t, other.slots[i]!) && sameNamespace(this.slotNs[i]!, other.slotNs[i]!),
    );
  }

  /**
   * The server restarted: the RAM cache and every slot are empty, but those in `keep` (slots that
   * ran the node's requests since the restart: the mirror knows what they hold).
   */
  clear(keep: ReadonlySet<number> = new Set()): void {
    for (let i = 0; i < this.slots.length; i++) if (!keep.has(i)) this.slots[i] = new Uint32Array(0);
    this.cache = this.newCache();
    this.version++;
  }

  /**
   * Every sequence the server caches, as far as known, as its namespace's cache key: the slots, then
   * the RAM cache's prompts.
   */
  sequences(): Uint32Array[] {
    const out: Uint32Array[] = [];
    this.slots.forEach((t, i) => {
      const k = knownPrefix(t);
      if (k.length > 0) out.push(taggedKey(this.slotNs[i]!, k));
    });
    for (const st of this.cache?.states ?? []) {
      const k = knownPrefix(st.tokens);
      if (k.length > 0) out.push(taggedKey(st.ns, k));
    }
    return out;
  }

  /** Token counts of each slot and of the RAM cache (for /cluster). */
  stats(): { slotTokens: number[]; cachedPrompts: number; cachedPromptTokens: number } {
    const states = this.cache?.states ?? [];
    return {
      slotTokens: this.slots.map((t) => t.length),
      cachedPrompts: states.length,
      cachedPromptTokens: states.reduce((n, s) => n + s.tokens.length, 0),
    };
  }

  /**
   * Slot choice and idle saves on `cache` (the live one, or a clone to predict): the slot's tokens
   * after, their namespace, and whether the server saved and loaded the RAM cache for this slot.
   */
  private select(
    slot: number,
    prompt: Uint32Array,
    cache: PromptCacheModel | undefined,
    idle: readonly number[],
  ): { tokens: Uint32Array; ns: NamespaceFields; cacheUpdated: boolean } {
    const c = this.config;
    let tokens = this.slots[slot]!;
    let ns = this.slotNs[slot]!;
    let update = false;
    if (c.similarity !== 0) {
      let simBest = 0;
      if (tokens.length > 0) {
        const sim = f32(lcp(tokens, prompt) / prompt.length);
        if (sim > simBest && sim > c.similarity) simBest = sim;
      }
      // float × size_t / size_t in C++: single precision; 0/0 (empty slot) is NaN, never below 0.5.
      const keep = f32(f32(simBest * f32(prompt.length)) / f32(tokens.length));
      if (keep < 0.5) update = true;
    }
    if (update && cache) {
      cache.save(tokens, ns);
      const restored = cache.loadState(tokens, prompt);
      if (restored) ({ tokens, ns } = restored);
      cache.update();
    }
    if (cache && c.cacheIdleSlots) {
      for (const other of idle) {
        if (other === slot) continue;
        cache.save(this.slots[other]!, this.slotNs[other]);
        cache.update();
      }
    }
    if (cache === this.cache) {
      this.slots[slot] = tokens;
      this.slotNs[slot] = ns;
      if (cache && c.cacheIdleSlots && c.kvUnified)
        for (const other of idle) if (other !== slot) this.slots[other] = new Uint32Array(0);
    }
    return { tokens, ns, cacheUpdated: update && cache !== undefined };
  }
}

/** What the server reports as cached: the common prefix, less one when it is all of the prompt. */
function cachedPrefix(slot: Uint32Array, prompt: Uint32Array): number {
  const n = lcp(slot, prompt);
  return n === prompt.length && n > 0 ? n - 1 : n;
}
