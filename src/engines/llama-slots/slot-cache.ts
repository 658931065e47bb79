/**
 * The remote engine's cache when the server is llama.cpp's `llama-server`: the node chooses the slot
 * of every request (`id_slot`, `cache_prompt: true`, on the server's native `/completion`, which also
 * streams the generated token ids), so the slot mirror (slot-mirror.ts) knows what each slot and the
 * RAM prompt cache hold, and predicts the server's `cache_n` before each run.
 *
 * Resynchronization from `GET /slots`: resync.ts. Order of events (an end and a start whose order the
 * node cannot see, kept as worlds until a report tells them apart): event-order.ts.
 *
 * Namespaces: a request reuses a slot's content only when the mirror says it is its own namespace's
 * (slot-mirror.ts); else it goes with `cache_prompt: false` and the server reuses nothing. While the
 * RAM cache holds prompts the node never saw (`inexact`), a namespaced request reuses only when the
 * server will not touch that cache for it; and a request reuses only when its slot's content is its
 * own namespace's whether or not the runs going on in other slots end (and are saved to the RAM
 * cache) before it starts, in every world. Saved slot states are restored for their namespace only.
 *
 * At most one request per slot: runs beyond the slot count wait here, first come first served.
 */
import type { EngineChunk, EngineRequest, Tokens } from "../../core/engine.js";
import { type CachePrediction, PredictionTally } from "../cache-prediction.js";
import type { HttpClient } from "../http-client.js";
import { DEFAULT_NAMESPACE, namespaceTag } from "../namespace-tags.js";
import type { SamplingFields } from "../sampling-fields.js";
import { RamCacheCalibration } from "./calibration.js";
import { streamCompletion } from "./completion-stream.js";
import { EventOrder, surelyElapsed } from "./event-order.js";
import type { LlamaSlotsConfig } from "./options.js";
import { SlotResync } from "./resync.js";
import { SavedSlots } from "./saved-slots.js";
import { readProps, readSlots } from "./server-api.js";
import { SlotMirror } from "./slot-mirror.js";
import { SlotSpill } from "./slot-spill.js";
import { LaunchLock, TurnQueue } from "./turns.js";
import { MirrorWorlds } from "./worlds.js";

export interface SlotRunResult {
  text: string;
  completionTokens: number;
  promptTokens: number;
  cachedTokens: number;
  cacheReported: boolean;
  prefillMs: number;
  decodeMs: number;
  finishReason: "stop" | "length";
  cachedSequences: Tokens[];
  cachePrediction: CachePrediction;
}

export interface LlamaSlotsStatus {
  mode: "llama-slots";
  slots: number;
  /** Why the mirror may be wrong (e.g. the server ran requests before the node), when it may. */
  inexact: string | undefined;
  /** Set when the runs showed the server's RAM prompt cache set otherwise than the node was told. */
  calibrated: string | undefined;
  resyncs: number;
  restarts: number;
  /** Orders of events the node could not tell apart (worlds.ts): worlds kept now, forks, worlds dropped. */
  worlds: { now: number; forks: number; dropped: number };
  /** States saved to the server's --slot-save-path, and why saving is off when it was refused. */
  savedSlots: { enabled: boolean; off: string | undefined; states: number; saves: number; restores: number };
  slotTokens: number[];
  cachedPrompts: number;
  cachedPromptTokens: number;
}

export class LlamaSlotCache {
  /**
   * The mirrors the server may be in (worlds.ts): the likeliest is the one the node follows; and one
   * with the other RAM-cache setting (see calibrate).
   */
  private readonly worlds: MirrorWorlds;
  private shadow: SlotMirror | undefined;
  /** Whether the runs say the shadow's RAM cache setting is the server's (calibration.ts). */
  private readonly calibration = new RamCacheCalibration();
  private calibrated: string | undefined;
  readonly tally = new PredictionTally("llama-slots");
  private readonly busy = new Set<number>();
  /** At most one run per slot (turns.ts). */
  private readonly turns: TurnQueue;
  /** Launches in order (turns.ts). */
  private readonly launches = new LaunchLock();
  /** Starts and ends on one event clock, and the forks their order calls for (event-order.ts). */
  private readonly order: EventOrder;
  /** Reads of `/slots` (resync.ts). */
  private readonly resync: SlotResync;
  private inexact: string | undefined;
  /** States saved to the server's --slot-save-path (slot-spill.ts). */
  private readonly spill: SlotSpill;

  private constructor(
    private readonly http: HttpClient,
    slotsEndpoint: boolean,
    slots: number,
    slotContext: number,
    opts: LlamaSlotsConfig,
  ) {
    const config = { ...opts, slots, totalContextTokens: slots * slotContext };
    this.worlds = new MirrorWorlds(new SlotMirror(config));
    // The server does not say whether its RAM prompt cache is on: a shadow with the other setting
    // follows the same runs, and takes over when the runs say it is the server's.
    this.shadow = new SlotMirror({ ...config, cacheRamMiB: opts.cacheRamMiB === 0 ? 8192 : 0 });
    this.order = new EventOrder(slots, this.worlds, () => this.shadow);
    this.turns = new TurnQueue(slots);
    const saved =
      opts.savedSlots > 0 ? new SavedSlots(opts.savedSlots, `prefixmesh-${process.pid}`) : undefined;
    this.spill = new SlotSpill(http, saved);
    this.resync = new SlotResync(http, slotsEndpoint, slots, this.busy, this.launches, {
      slotTokens: () => this.mirror.stats().slotTokens,
      each: (fn) => this.each(fn),
      changing: () => this.order.resynced(),
      restarted: () => {
        this.inexact = undefined;
      },
    });
  }

  /**
   * The slot cache for the server at `http`, when it is a llama.cpp server (`/props` names its slots);
   * undefined otherwise. Reads `/slots` once: a server that already ran tasks has a RAM cache the node
   * cannot know, which the status says.
   */
  static async detect(http: HttpClient, opts: LlamaSlotsConfig): Promise<LlamaSlotCache | undefined> {
    const props = await readProps(http);
    if (!props) return undefined;
    const cache = new LlamaSlotCache(
      http,
      props.endpoint_slots !== false,
      props.total_slots,
      props.default_generation_settings.n_ctx,
      opts,
    );
    const slots = await readSlots(http, props.endpoint_slots !== false);
    if (slots?.some((s) => s.id_task !== undefined) && opts.cacheRamMiB !== 0)
      cache.inexact = "the server ran requests before this node started: its RAM prompt cache is unknown";
    if (slots) cache.resync.apply(slots);
    return cache;
  }

  /** The mirror the node follows: the likeliest of the worlds. */
  get mirror(): SlotMirror {
    return this.worlds.primary;
  }

  status(): LlamaSlotsStatus {
    return {
      mode: "llama-slots",
      slots: this.mirror.config.slots,
      inexact: this.inexact,
      calibrated: this.calibrated,
      resyncs: this.resync.resyncs,
      restarts: this.resync.restarts,
      worlds: { now: this.worlds.size, forks: this.worlds.forks, dropped: this.worlds.dropped },
      savedSlots: this.spill.status(),
      ...this.mirror.stats(),
    };
  }

  async run(
    req: EngineRequest,
    sampling: SamplingFields,
    onChunk?: (c: EngineChunk) => void,
    signal?: AbortSignal,
  ): Promise<SlotRunResult> {
    try {
      return await this.runTurn(req, sampling, onChunk, signal);
    } catch (e) {
      // The node's tree takes the engine's sequences with the abort: they must be what the server
      // kept of the aborted slot, not the guess made at its launch.
      if (signal?.aborted && this.resync.needed) await this.resync.abortReads.after();
      throw e;
    }
  }

  private async runTurn(
    req: EngineRequest,
    sampling: SamplingFields,
    onChunk: ((c: EngineChunk) => void) | undefined,
    signal: AbortSignal | undefined,
  ): Promise<SlotRunResult> {
    await this.turns.acquire(signal);
    let unlock: (() => void) | undefined;
    try {
      unlock = await this.launches.lock(signal);
    } catch (e) {
      // Aborted while another start held the lock: nothing reached the server.
      this.turns.release();
      throw e;
    }
    let slot: number | undefined;
    let notStarted: (() => void) | undefined;
    try {
      if (this.resync.needed) await this.resync.read();
      const free = this.freeSlots();
      const tokens = req.tokens;
      const ns = namespaceTag(req);
      slot = this.mirror.choose(tokens, free, ns).slot;
      this.busy.add(slot);
      if (this.spill.enabled)
        await this.spill.before(slot, tokens, ns, [slot, ...this.freeSlots()], this.mirror, (fn) =>
          this.each(fn),
        );
      const idle = [slot, ...this.freeSlots()];
      // Undone if the server never gets the request (refused, or aborted before it started).
      const before = this.worlds.save();
      const shadowBefore = this.shadow?.save();
      const chosen = slot;
      notStarted = () => {
        started.before = [];
        this.worlds.undo(before, chosen);
        if (shadowBefore) this.shadow?.undo(shadowBefore);
        this.order.unsent(started);
      };
      // Another namespace's content is never reused, whichever of the runs going on elsewhere end at
      // the server before this one starts; guarded: the RAM cache holds prompts from before the node.
      const guarded = this.inexact !== undefined && ns !== DEFAULT_NAMESPACE;
      const running = [...this.busy].filter((s) => s !== slot);
      // In every world the server may be in: a wrong guess of the order of events must not leak.
      const reuse = this.worlds.every((m) => m.reuses(chosen, tokens, idle, ns, guarded, running));
      const relaunch = (m: SlotMirror, alsoIdle: readonly number[]) =>
        m.launch(
          chosen,
          tokens,
          [chosen, ...[...idle.slice(1), ...alsoIdle].sort((a, b) => a - b)],
          ns,
          reuse,
        );
      const predicted = this.worlds.launch(slot, (m) => relaunch(m, []));
      const shadowPredicted = this.shadow?.launch(slot, tokens, idle, ns, reuse);
      const started = this.order.sent(slot, running, before, relaunch);
      const launched = (promptMs: number | undefined) => {
        notStarted = undefined;
        this.resync.began();
        this.order.began(started, promptMs);
        unlock?.();
        unlock = undefined;
      };
      const r = await this.complete(
        slot,
        started.at,
        tokens,
        req.maxTokens,
        sampling,
        predicted,
        reuse,
        launched,
        onChunk,
        signal,
      );
      this.calibrate(predicted, shadowPredicted, r.cachePrediction.reported);
      return r;
    } catch (e) {
      // The slot holds an unknown part of the prompt (an abort), or the server may have restarted.
      // A request that got no response may still have started: /slots says what the slot holds.
      notStarted?.();
      this.resync.needed = true;
      throw e;
    } finally {
      unlock?.();
      if (slot !== undefined) this.busy.delete(slot);
      this.turns.release();
    }
  }

  private async complete(
    slot: number,
    at: number,
    tokens: Tokens,
    maxTokens: number,
    sampling: SamplingFields,
    predicted: number,
    reuse: boolean,
    launched: (promptMs: number | undefined) => void,
    onChunk: ((c: EngineChunk) => void) | undefined,
    signal: AbortSignal | undefined,
  ): Promise<SlotRunResult> {
    const { text, generated, final, t0, firstAt, end } = await streamCompletion(
      this.http,
      { slot, tokens, maxTokens, sampling, reuse },
      launched,
      onChunk,
      signal,
    );
    const reported = final.timings?.cache_n;
    const completion = final.tokens_predicted ?? generated.length;
    // All generated tokens but the last were evaluated into the slot (tokens_cached says how many).
    const held = final.tokens_cached ?? tokens.length + Math.max(0, completion - 1);
    const finish = (m: SlotMirror) => m.finish(slot, tokens, generated, held);
    this.each(finish);
    // Idle at the server from now on: the next start must count it among the idle slots.
    this.busy.delete(slot);
    const cachePrediction = this.tally.observe(predicted, reported);
    const foreseen = this.worlds.report(slot, reported);
    const noEarlierMs =
      t0 + surelyElapsed((final.timings?.prompt_ms ?? 0) + (final.timings?.predicted_ms ?? 0));
    this.order.ended(slot, at, noEarlierMs, reported, finish);
    if (reported !== undefined && reported !== predicted && !foreseen) this.resync.needed = true;
    return {
      text,
      completionTokens: completion,
      promptTokens: final.tokens_evaluated ?? tokens.length,
      cachedTokens: reported ?? 0,
      cacheReported: reported !== undefined,
      prefillMs: final.timings?.prompt_ms ?? (firstAt > 0 ? firstAt - t0 : end - t0),
      decodeMs: final.timings?.predicted_ms ?? (firstAt > 0 ? end - firstAt : 0),
      finishReason: final.stop_type === "limit" ? "length" : "stop",
      cachedSequences: this.sequences(),
      cachePrediction,
    };
  }

  /** Every sequence the server caches, as the mirror knows it, and the slot states saved on its disk. */
  sequences(): Tokens[] {
    return [...this.mirror.sequences(), ...this.spill.sequences()];
  }

  /** Changes every world's mirror and the shadow alike. */
  private each(fn: (m: SlotMirror) => void): void {
    this.worlds.each(fn);
    if (this.shadow) fn(this.shadow);
  }

  /** When the runs say the RAM cache is set otherwise (calibration.ts): the shadow becomes the mirror. */
  private calibrate(predicted: number, shadow: number | undefined, reported: number | undefined): void {
    if (!this.shadow || shadow === undefined || reported === undefined) return;
    const on = this.shadow.config.cacheRamMiB !== 0;
    const verdict = this.calibration.observe(predicted === reported, shadow === reported, on);
    if (verdict === undefined) return;
    this.calibrated = verdict;
    this.worlds.reset(this.shadow);
    this.shadow = undefined;
  }

  private freeSlots(): number[] {
    const out: number[] = [];
    for (let s = 0; s < this.mirror.config.slots; s++) if (!this.busy.has(s)) out.push(s);
    return out;
  }

  /** The server was found down: the next run (or `recheck`) reads `/slots` first. */
  resyncNext(): void {
    this.resync.needed = true;
  }

  /**
   * Reads `/slots` now, between runs (as a start would, under the launch lock): a restarted server
   * clears the mirror here instead of at the next run's surprise. True when the read succeeded.
   */
  async recheck(): Promise<boolean> {
    this.resync.needed = true;
    const unlock = await this.launches.lock();
    try {
      if (this.resync.needed) await this.resync.read();
    } finally {
      unlock();
    }
    return !this.resync.needed;
  }

  /** Calls `onChange` when a read-back no aborted run waited for changed what the slots hold. */
  watch(onChange: () => void): () => void {
    return this.resync.abortReads.watch(onChange);
  }

  /** Reads back after an abort so far (status and tests). */
  get abortReadsMade(): number {
    return this.resync.abortReads.reads;
  }

  /** Whether reads back after an abort go on now (tests). */
  get abortReading(): boolean {
    return this.resync.abortReads.active;
  }

  /** No more reads in the background (the engine closes). */
  close(): void {
    this.resync.abortReads.close();
  }
}
