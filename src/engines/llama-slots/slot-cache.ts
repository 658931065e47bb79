/**
 * The remote engine's cache when the server is llama.cpp's `llama-server`: the node chooses the slot
 * of every request (`id_slot`, `cache_prompt: true`, on the server's native `/completion`, which also
 * streams the generated token ids), so the slot mirror (slot-mirror.ts) knows what each slot and the
 * RAM prompt cache hold, and predicts the server's `cache_n` before each run.
 *
 * Resynchronization: an aborted run reads `GET /slots` before its abort is reported (so the tree
 * mirrors what the server kept of it); after a failed run, an abort whose slot was still busy at the
 * server, or a prediction the server contradicts, the next run first reads it (when the server
 * exposes it): each idle slot's token count corrects the
 * mirror, and a slot that has never run a task (or a task counter that went back) while the mirror
 * holds tokens says the server restarted: the mirror is cleared, RAM cache included.
 *
 * Order of events: a run's end and another's start come in on two connections, in either order
 * whatever the server's; where the order decides what the RAM cache holds, the mirror keeps both
 * worlds (worlds.ts) until a reported `cache_n` tells them apart.
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
import { z } from "zod";
import type { EngineChunk, EngineRequest, Tokens } from "../../core/engine.js";
import { type NamespaceFields, namespaceOf } from "../../core/namespace.js";
import { type CachePrediction, PredictionTally } from "../cache-prediction.js";
import { EngineAbortedError, EngineInputError, EngineUnavailableError } from "../errors.js";
import { DEFAULT_NAMESPACE, namespaceTag } from "../namespace-tags.js";
import type { HttpClient } from "../openai/http.js";
import { sseData } from "../openai/sse.js";
import { AbortReadBack, type ReadVerdict } from "./abort-read-back.js";
import type { LlamaSlotsConfig } from "./options.js";
import { SavedSlots } from "./saved-slots.js";
import { SlotMirror } from "./slot-mirror.js";
import { knownPrefix, lcp } from "./tokens.js";
import { MirrorWorlds } from "./worlds.js";

const PropsShape = z.object({
  total_slots: z.number().int().min(1).max(4096),
  endpoint_slots: z.boolean().optional(),
  default_generation_settings: z.object({ n_ctx: z.number().int().min(1).max(10_000_000) }),
});

const SlotsShape = z
  .array(
    z.object({
      id: z.number().int().min(0).max(4096),
      is_processing: z.boolean().optional(),
      id_task: z.number().int().optional(),
      n_prompt_tokens: z.number().int().min(0).max(10_000_000).optional(),
    }),
  )
  .max(4096);

const TokenId = z
  .number()
  .int()
  .min(0)
  .max(2 ** 32 - 1);
const NativeChunk = z.object({
  content: z.string().optional(),
  tokens: z
    .array(TokenId)
    .max(1 << 20)
    .optional(),
  stop: z.boolean().optional(),
  stop_type: z.string().optional(),
  tokens_cached: z.number().int().min(0).optional(),
  tokens_predicted: z.number().int().min(0).optional(),
  tokens_evaluated: z.number().int().min(0).optional(),
  timings: z
    .object({
      cache_n: z.number().int().min(0).optional(),
      prompt_ms: z.number().optional(),
      predicted_ms: z.number().optional(),
    })
    .nullish(),
  error: z.unknown().optional(),
});

const MAX_OUTPUT_CHARS = 4 << 20;

/** See `calibrate`. */
const CALIBRATION_RUNS = 16;
const CALIBRATION_SHADOW = 14;
const CALIBRATION_MIRROR = 10;

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
  /** The last runs' outcomes: [mirror exact, shadow exact]. */
  private readonly evidence: [boolean, boolean][] = [];
  private calibrated: string | undefined;
  readonly tally = new PredictionTally("llama-slots");
  private readonly busy = new Set<number>();
  private readonly waiting: (() => void)[] = [];
  /** Runs holding a turn (at most one per slot): handed straight to the next waiter on release. */
  private turns = 0;
  /** Launches in order (see lockLaunch), and when each slot's last run ended, on one event clock. */
  private launching: Promise<void> = Promise.resolve();
  private events = 0;
  /** The latest start sent: when (event clock), the slots running then, and whether it began. */
  private lastStart: { at: number; running: number[]; launched: boolean } | undefined;
  private readonly endedAt: number[];
  private needsResync = false;
  private resyncing: Promise<void> | undefined;
  /** `/slots` read back after an abort (abort-read-back.ts). */
  private readonly abortReads: AbortReadBack;
  private readonly lastTask: (number | undefined)[];
  /**
   * Runs the server started (their response began), and the count at which its task ids began: every
   * run takes a task id, so while the server lives its latest id is at least started − base − 1.
   */
  private started = 0;
  private taskBase = 0;
  private inexact: string | undefined;
  private resyncs = 0;
  private restarts = 0;
  /** States saved to the server's --slot-save-path (undefined: off, or the server refused). */
  private saved: SavedSlots | undefined;
  private savedOff: string | undefined;
  private slotSaves = 0;
  private slotRestores = 0;

  private constructor(
    private readonly http: HttpClient,
    private readonly slotsEndpoint: boolean,
    slots: number,
    slotContext: number,
    opts: LlamaSlotsConfig,
  ) {
    const config = { ...opts, slots, totalContextTokens: slots * slotContext };
    this.worlds = new MirrorWorlds(new SlotMirror(config));
    // The server does not say whether its RAM prompt cache is on: a shadow with the other setting
    // follows the same runs, and takes over when the runs say it is the server's.
    this.shadow = new SlotMirror({ ...config, cacheRamMiB: opts.cacheRamMiB === 0 ? 8192 : 0 });
    this.lastTask = new Array<number | undefined>(slots).fill(undefined);
    this.endedAt = new Array<number>(slots).fill(0);
    if (opts.savedSlots > 0) this.saved = new SavedSlots(opts.savedSlots, `prefixmesh-${process.pid}`);
    // A prefill the abort cut short goes on at most as long as the engine waits on a silent server.
    this.abortReads = new AbortReadBack(http.silenceBoundMs, () => this.readAborted());
  }

  /**
   * The slot cache for the server at `http`, when it is a llama.cpp server (`/props` names its slots);
   * undefined otherwise. Reads `/slots` once: a server that already ran tasks has a RAM cache the node
   * cannot know, which the status says.
   */
  static async detect(http: HttpClient, opts: LlamaSlotsConfig): Promise<LlamaSlotCache | undefined> {
    let props: z.infer<typeof PropsShape>;
    try {
      const p = PropsShape.safeParse(await http.json("GET", "/props"));
      if (!p.success) return undefined;
      props = p.data;
    } catch (e) {
      if (e instanceof EngineInputError) return undefined;
      throw e;
    }
    const cache = new LlamaSlotCache(
      http,
      props.endpoint_slots !== false,
      props.total_slots,
      props.default_generation_settings.n_ctx,
      opts,
    );
    const slots = await cache.readSlots();
    if (slots?.some((s) => s.id_task !== undefined) && opts.cacheRamMiB !== 0)
      cache.inexact = "the server ran requests before this node started: its RAM prompt cache is unknown";
    if (slots) cache.applySlots(slots);
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
      resyncs: this.resyncs,
      restarts: this.restarts,
      worlds: { now: this.worlds.size, forks: this.worlds.forks, dropped: this.worlds.dropped },
      savedSlots: {
        enabled: this.saved !== undefined,
        off: this.savedOff,
        states: this.saved?.entries.length ?? 0,
        saves: this.slotSaves,
        restores: this.slotRestores,
      },
      ...this.mirror.stats(),
    };
  }

  async run(
    req: EngineRequest,
    sampling: Record<string, unknown>,
    onChunk?: (c: EngineChunk) => void,
    signal?: AbortSignal,
  ): Promise<SlotRunResult> {
    try {
      return await this.runTurn(req, sampling, onChunk, signal);
    } catch (e) {
      // The node's tree takes the engine's sequences with the abort: they must be what the server
      // kept of the aborted slot, not the guess made at its launch.
      if (signal?.aborted && this.needsResync) await this.abortReads.after();
      throw e;
    }
  }

  private async runTurn(
    req: EngineRequest,
    sampling: Record<string, unknown>,
    onChunk: ((c: EngineChunk) => void) | undefined,
    signal: AbortSignal | undefined,
  ): Promise<SlotRunResult> {
    await this.acquireTurn(signal);
    let slot: number | undefined;
    let unlock: (() => void) | undefined;
    let notStarted: (() => void) | undefined;
    try {
      unlock = await this.lockLaunch();
      if (this.needsResync) await this.resync();
      const free = this.freeSlots();
      const tokens = req.tokens;
      const ns = namespaceTag(req);
      slot = this.mirror.choose(tokens, free, ns).slot;
      this.busy.add(slot);
      if (this.saved) await this.useSavedSlots(slot, tokens, ns);
      const idle = [slot, ...this.freeSlots()];
      // Undone if the server never gets the request (refused, or aborted before it started).
      const before = this.worlds.save();
      const shadowBefore = this.shadow?.save();
      const chosen = slot;
      notStarted = () => {
        this.worlds.undo(before, chosen);
        if (shadowBefore) this.shadow?.undo(shadowBefore);
      };
      // Another namespace's content is never reused, whichever of the runs going on elsewhere end at
      // the server before this one starts; guarded: the RAM cache holds prompts from before the node.
      const guarded = this.inexact !== undefined && ns !== DEFAULT_NAMESPACE;
      const running = [...this.busy].filter((s) => s !== slot);
      // In every world the server may be in: a wrong guess of the order of events must not leak.
      const reuse = this.worlds.every((m) => m.reuses(chosen, tokens, idle, ns, guarded, running));
      const predicted = this.worlds.launch(slot, (m) => m.launch(chosen, tokens, idle, ns, reuse));
      const shadowPredicted = this.shadow?.launch(slot, tokens, idle, ns, reuse);
      const started = { at: ++this.events, running, launched: false };
      this.lastStart = started;
      const launched = () => {
        notStarted = undefined;
        this.started++;
        started.launched = true;
        // A run whose end came in after this one was sent, but before the server said this one
        // started, most likely ended at the server before (it was idle, and saved, when this one
        // started); its end may also have overtaken this start on the way (worlds.ts).
        for (const o of started.running)
          if (this.endedAt[o]! > started.at) {
            this.worlds.fork((m) => m.idleSaved(o), true);
            this.shadow?.idleSaved(o);
          }
        unlock?.();
        unlock = undefined;
      };
      const r = await this.complete(
        slot,
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
      this.needsResync = true;
      throw e;
    } finally {
      unlock?.();
      if (slot !== undefined) this.busy.delete(slot);
      const next = this.waiting.shift();
      if (next) next();
      else this.turns--;
    }
  }

  /**
   * One request starts at a time, from choosing its slot until the server's response begins: the
   * server then applies starts in the order the mirror does.
   */
  private async lockLaunch(): Promise<() => void> {
    const prev = this.launching;
    let release!: () => void;
    this.launching = new Promise<void>((r) => {
      release = r;
    });
    await prev;
    return release;
  }

  private async complete(
    slot: number,
    tokens: Tokens,
    maxTokens: number,
    sampling: Record<string, unknown>,
    predicted: number,
    reuse: boolean,
    launched: () => void,
    onChunk: ((c: EngineChunk) => void) | undefined,
    signal: AbortSignal | undefined,
  ): Promise<SlotRunResult> {
    const body = {
      ...sampling,
      prompt: Array.from(tokens),
      n_predict: maxTokens,
      id_slot: slot,
      // false: the server computes the whole prompt (n_past = 0), whatever the slot holds.
      cache_prompt: reuse,
      return_tokens: true,
      stream: true,
    };
    const t0 = performance.now();
    // llama-server closes the connection after a stream: never reuse it (a reuse races the close).
    const res = await this.http.send("POST", "/completion", body, signal, true);
    launched();
    let text = "";
    const generated: number[] = [];
    let firstAt = 0;
    let final: z.infer<typeof NativeChunk> | undefined;
    try {
      for await (const data of sseData(res.body)) {
        const parsed = NativeChunk.safeParse(safeJson(data));
        if (!parsed.success)
          throw new EngineUnavailableError(
            `unexpected stream event from llama-server: ${data.slice(0, 120)}`,
          );
        const ev = parsed.data;
        if (ev.error !== undefined)
          throw new EngineUnavailableError(`llama-server: ${JSON.stringify(ev.error).slice(0, 200)}`);
        if (ev.tokens) for (const t of ev.tokens) generated.push(t);
        if (ev.content) {
          if (firstAt === 0) firstAt = performance.now();
          text += ev.content;
          if (text.length > MAX_OUTPUT_CHARS)
            throw new EngineUnavailableError("server output exceeds the size bound");
          onChunk?.({ text: ev.content });
        }
        if (ev.stop) final = ev;
      }
    } catch (e) {
      res.body.destroy();
      if (signal?.aborted) throw new EngineAbortedError();
      if (e instanceof EngineUnavailableError) throw e;
      throw new EngineUnavailableError(`stream from server failed: ${(e as Error).message}`);
    }
    if (!final) throw new EngineUnavailableError("llama-server's stream ended without its final event");
    const end = performance.now();
    const reported = final.timings?.cache_n;
    const completion = final.tokens_predicted ?? generated.length;
    // All generated tokens but the last were evaluated into the slot (tokens_cached says how many).
    const held = final.tokens_cached ?? tokens.length + Math.max(0, completion - 1);
    this.each((m) => m.finish(slot, tokens, generated, held));
    this.endedAt[slot] = ++this.events;
    // Idle at the server from now on: the next start must count it among the idle slots.
    this.busy.delete(slot);
    const cachePrediction = this.tally.observe(predicted, reported);
    const foreseen = this.worlds.report(slot, reported);
    // The latest start began before this end came in, though the server may have ended this run
    // first (the two responses travel apart): then this slot was idle, and saved, at that start.
    // Nothing has touched the RAM cache since that start's own idle saves, so saving it now is that.
    const last = this.lastStart;
    if (last?.launched && last.running.includes(slot)) this.worlds.fork((m) => m.idleSaved(slot), false);
    if (reported !== undefined && reported !== predicted && !foreseen) this.needsResync = true;
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
    return [...this.mirror.sequences(), ...(this.saved?.sequences() ?? [])];
  }

  /**
   * Before a run on `slot`: restores the saved state that gives `prompt` more cached tokens than the
   * server would find, and first saves the slot's contents when the run would lose most of them and no
   * saved state holds them (the embedded engine's spill and restore, on the server's disk).
   */
  private async useSavedSlots(slot: number, prompt: Tokens, ns: NamespaceFields): Promise<void> {
    const saved = this.saved!;
    const idle = [slot, ...this.freeSlots()];
    const current = this.mirror.slotTokens(slot);
    const currentNs = this.mirror.slotNamespace(slot);
    const without = this.mirror.predict(slot, prompt, idle, undefined, ns);
    const best = saved.best(prompt, ns);
    const restore =
      best && this.mirror.predict(slot, prompt, idle, best.state.tokens, ns) > without
        ? best.state
        : undefined;
    if (restore) saved.touch(restore);
    const ownNs = namespaceOf(currentNs) === namespaceOf(ns);
    const loses = restore !== undefined || !ownNs || 2 * lcp(current, prompt) < current.length;
    if (loses && knownPrefix(current).length > 0 && !saved.covers(current, currentNs)) {
      const file = saved.nextFile();
      if (file !== restore?.filename && (await this.slotAction(slot, "save", file))) {
        saved.saved(file, current, currentNs);
        this.slotSaves++;
      }
    }
    if (!restore || !this.saved) return;
    if (await this.slotAction(slot, "restore", restore.filename)) {
      this.each((m) => m.restore(slot, restore.tokens, restore.ns));
      this.slotRestores++;
    } else {
      // A failed restore leaves the slot empty (the server clears it).
      this.each((m) => m.restore(slot, new Uint32Array(0)));
      saved.drop(restore);
    }
  }

  /** `POST /slots/{id}?action=…`; false when the server refused (a refused save turns saving off). */
  private async slotAction(slot: number, action: "save" | "restore", filename: string): Promise<boolean> {
    try {
      await this.http.json("POST", `/slots/${slot}?action=${action}`, { filename });
      return true;
    } catch (e) {
      // 4xx: refused (a missing file, a bad name); 501: the server has no --slot-save-path.
      const refused =
        e instanceof EngineInputError || (e instanceof EngineUnavailableError && e.status === 501);
      if (!refused) throw e;
      if (action === "save") {
        this.savedOff = `the server refused to save a slot (is it running with --slot-save-path?): ${e.message}`;
        this.saved = undefined;
      }
      return false;
    }
  }

  /** Changes every world's mirror and the shadow alike. */
  private each(fn: (m: SlotMirror) => void): void {
    this.worlds.each(fn);
    if (this.shadow) fn(this.shadow);
  }

  /**
   * Over the last CALIBRATION_RUNS reported runs, a shadow right at least CALIBRATION_SHADOW times
   * while the mirror was right at most CALIBRATION_MIRROR times says the server's RAM prompt cache is
   * set otherwise than the node was told (`--engine-cache-ram`): the shadow becomes the mirror, once.
   */
  private calibrate(predicted: number, shadow: number | undefined, reported: number | undefined): void {
    if (!this.shadow || shadow === undefined || reported === undefined) return;
    this.evidence.push([predicted === reported, shadow === reported]);
    if (this.evidence.length > CALIBRATION_RUNS) this.evidence.shift();
    if (this.evidence.length < CALIBRATION_RUNS) return;
    const mine = this.evidence.filter((e) => e[0]).length;
    const other = this.evidence.filter((e) => e[1]).length;
    if (other < CALIBRATION_SHADOW || mine > CALIBRATION_MIRROR) return;
    const on = this.shadow.config.cacheRamMiB !== 0;
    this.calibrated =
      `the server's RAM prompt cache looks ${on ? "on" : "off"} (${other} of the last ${CALIBRATION_RUNS} ` +
      `runs predicted right that way, ${mine} as configured): set --engine-cache-ram ${on ? "to its --cache-ram" : "0"}`;
    this.worlds.reset(this.shadow);
    this.shadow = undefined;
  }

  private freeSlots(): number[] {
    const out: number[] = [];
    for (let s = 0; s < this.mirror.config.slots; s++) if (!this.busy.has(s)) out.push(s);
    return out;
  }

  /** Waits for a free slot (first come, first served). */
  private acquireTurn(signal?: AbortSignal): Promise<void> {
    if (this.turns < this.mirror.config.slots && this.waiting.length === 0) {
      this.turns++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const go = () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      };
      const onAbort = () => {
        const i = this.waiting.indexOf(go);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(new EngineAbortedError());
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(go);
    });
  }

  /**
   * One read of `/slots` after an abort (abort-read-back.ts): idle once every slot not running here is
   * idle at the server. It holds the launch lock, like every read before a start, so starts and reads
   * reach the server in the mirror's order. A slot still busy when the reads end, or a failed read,
   * leaves the flag set: the next run reads again.
   */
  private async readAborted(): Promise<ReadVerdict> {
    const unlock = await this.lockLaunch();
    try {
      const slots = await this.readSlots();
      if (!slots) return "stop";
      this.applySlots(slots);
      if (slots.some((s) => s.is_processing && !this.busy.has(s.id))) return "busy";
      this.needsResync = false;
      return "idle";
    } catch {
      // The server is down: the next run says so, and reads /slots first.
      return "stop";
    } finally {
      unlock();
    }
  }

  /** Calls `onChange` when a read-back no aborted run waited for changed what the slots hold. */
  watch(onChange: () => void): () => void {
    return this.abortReads.watch(onChange);
  }

  /** Reads back after an abort so far (status and tests). */
  get abortReadsMade(): number {
    return this.abortReads.reads;
  }

  /** Whether reads back after an abort go on now (tests). */
  get abortReading(): boolean {
    return this.abortReads.active;
  }

  /** No more reads in the background (the engine closes). */
  close(): void {
    this.abortReads.close();
  }

  /** Reads `/slots` into the mirror (one at a time); a failure leaves the flag set for the next run. */
  private resync(): Promise<void> {
    this.resyncing ??= (async () => {
      try {
        const slots = await this.readSlots();
        this.needsResync = false;
        if (slots) this.applySlots(slots);
      } catch {
        // The server is down: the run itself will say so; try again next time.
      } finally {
        this.resyncing = undefined;
      }
    })();
    return this.resyncing;
  }

  private async readSlots(): Promise<z.infer<typeof SlotsShape> | undefined> {
    if (!this.slotsEndpoint) return undefined;
    try {
      const p = SlotsShape.safeParse(await this.http.json("GET", "/slots"));
      return p.success ? p.data : undefined;
    } catch (e) {
      if (e instanceof EngineInputError) return undefined;
      throw e;
    }
  }

  private applySlots(slots: z.infer<typeof SlotsShape>): void {
    this.resyncs++;
    const known = this.mirror.stats().slotTokens;
    const latest = slots.reduce<number | undefined>(
      (m, s) => (s.id_task === undefined ? m : Math.max(m ?? -1, s.id_task)),
      undefined,
    );
    // Task ids restarted (fewer than the runs it started since), or a slot never ran one while the
    // mirror holds tokens there: a new server.
    const restarted =
      (latest ?? -1) < this.started - this.taskBase - 1 ||
      slots.some((s) => {
        const last = this.lastTask[s.id];
        return (
          (s.id_task === undefined && (known[s.id] ?? 0) > 0) ||
          (last !== undefined && (s.id_task === undefined || s.id_task < last))
        );
      });
    // Every task the server ran counts as one of ours (the bound stays true without a restart).
    if (restarted || this.resyncs === 1) this.taskBase = this.started - (latest ?? -1) - 1;
    if (restarted) {
      this.restarts++;
      this.inexact = undefined;
      // A slot that ran a task on the new server ran one of ours since: the mirror holds it already.
      const ran = new Set(slots.filter((s) => s.id_task !== undefined).map((s) => s.id));
      this.each((m) => m.clear(ran));
    }
    const lengths: (number | undefined)[] = [];
    for (const s of slots) {
      this.lastTask[s.id] = s.id_task;
      if (!s.is_processing && !this.busy.has(s.id))
        lengths[s.id] = s.id_task === undefined ? 0 : s.n_prompt_tokens;
    }
    this.each((m) => m.resync(lengths));
  }
}

function safeJson(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}
