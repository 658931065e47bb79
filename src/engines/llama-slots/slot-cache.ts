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
 * worlds (worlds.ts) until a reported `cache_n` tells them apart. A start counts as begun at its
 * first event, whose prompt time bounds when the server started it (its headers come early in its
 * prefill, and an end that comes in after them had often reached the server first). The server's
 * own times rule out orders that cannot be: a run that ran longer than the time between its send
 * and another start's latest possible start was still running then.
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
import { AbortReadBack, type ReadVerdict } from "./abort-read-back.js";
import { RamCacheCalibration } from "./calibration.js";
import { streamCompletion } from "./completion-stream.js";
import type { LlamaSlotsConfig } from "./options.js";
import { SavedSlots } from "./saved-slots.js";
import { readProps, readSlots, type ServerSlots } from "./server-api.js";
import { SlotMirror } from "./slot-mirror.js";
import { SlotSpill } from "./slot-spill.js";
import { LaunchLock, TurnQueue } from "./turns.js";
import { MirrorWorlds } from "./worlds.js";

/** A start sent: when (event clock), the slots running then, whether it began, and by when (ms). */
interface StartRecord {
  at: number;
  slot: number;
  running: number[];
  launched: boolean;
  /** The latest time the server can have started it, once it began. */
  latestMs: number;
  /** The worlds before it, and its launch with more idle slots: to replay it after an earlier event. */
  before: ReturnType<MirrorWorlds["save"]>;
  relaunch: (m: SlotMirror, alsoIdle: readonly number[]) => number;
  /** The ends that came in since it was sent, and its own run's count once that ended. */
  since: ((m: SlotMirror) => void)[];
  reported: number | undefined;
}

const CLOCK_MARGIN_MS = 1;

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
  /** Launches in order (turns.ts), and when each slot's last run ended, on one event clock. */
  private readonly launches = new LaunchLock();
  private events = 0;
  /** The latest start sent, and the one sent before it. */
  private lastStart: StartRecord | undefined;
  private prevStart: StartRecord | undefined;
  private readonly endedAt: number[];
  /**
   * The earliest each slot's last run can have ended at the server (ms): sent then, plus the server's
   * own prompt and generation times.
   */
  private readonly endedNoEarlier: number[];
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
  /** States saved to the server's --slot-save-path (slot-spill.ts). */
  private readonly spill: SlotSpill;

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
    this.endedNoEarlier = new Array<number>(slots).fill(0);
    this.turns = new TurnQueue(slots);
    const saved =
      opts.savedSlots > 0 ? new SavedSlots(opts.savedSlots, `prefixmesh-${process.pid}`) : undefined;
    this.spill = new SlotSpill(http, saved);
    // A prefill the abort cut short goes on at most as long as the engine waits on a silent server.
    this.abortReads = new AbortReadBack(http.silenceBoundMs, () => this.readAborted());
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
    const slots = await readSlots(http, cache.slotsEndpoint);
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
      if (signal?.aborted && this.needsResync) await this.abortReads.after();
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
    let slot: number | undefined;
    let unlock: (() => void) | undefined;
    let notStarted: (() => void) | undefined;
    try {
      unlock = await this.launches.lock();
      if (this.needsResync) await this.resync();
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
      const started: StartRecord = {
        at: ++this.events,
        slot,
        running,
        launched: false,
        latestMs: 0,
        before,
        relaunch,
        since: [],
        reported: undefined,
      };
      this.prevStart = this.lastStart;
      this.lastStart = started;
      const launched = (promptMs: number | undefined) => {
        notStarted = undefined;
        this.started++;
        started.launched = true;
        // The server started it before its first event, and before the prompt time that event reports.
        started.latestMs = performance.now() - (promptMs ?? 0);
        // A run whose end came in after this one was sent, but before its first event, most likely
        // ended at the server before this one started (it was idle, and saved, then); its end may
        // also have overtaken this start on the way (worlds.ts). Not when the times rule it out.
        for (const o of started.running)
          if (this.endedAt[o]! > started.at && this.mayHaveEnded(o, started)) {
            this.worlds.fork((m) => m.idleSaved(o), true);
            this.shadow?.idleSaved(o);
          }
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
      this.needsResync = true;
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
    this.endedAt[slot] = ++this.events;
    this.endedNoEarlier[slot] = t0 + (final.timings?.prompt_ms ?? 0) + (final.timings?.predicted_ms ?? 0);
    // Idle at the server from now on: the next start must count it among the idle slots.
    this.busy.delete(slot);
    const cachePrediction = this.tally.observe(predicted, reported);
    const foreseen = this.worlds.report(slot, reported);
    // A start that began while this run went on, though the server may have ended this run first
    // (the two responses travel apart): then this slot was idle, and saved, at that start. Nothing
    // has touched the RAM cache since that start's own idle saves, so saving it now is that.
    const last = this.lastStart;
    if (last?.launched && this.ranDuring(slot, at, last)) this.worlds.fork((m) => m.idleSaved(slot), false);
    // Or it ended before the start sent before that one: saved before the latest start chose what
    // to restore, which is replayed on each world's state from before it.
    const prev = this.prevStart;
    if (last && last.before.length > 0 && prev?.launched && this.ranDuring(slot, at, prev)) {
      this.worlds.forkBefore(
        last.before,
        (m) => {
          finish(m);
          m.idleSaved(slot);
        },
        { slot: last.slot, launch: (m) => last.relaunch(m, [slot]), reported: last.reported },
        last.since,
      );
    }
    if (last?.at === at) last.reported = reported;
    last?.since.push(finish);
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

  /**
   * Whether the last run on `slot` can have ended at the server before `start` did: false when it
   * ran past the latest time the server can have started `start` (its times say so; the margin covers
   * rounding of the two clocks).
   */
  private mayHaveEnded(slot: number, start: StartRecord): boolean {
    return this.endedNoEarlier[slot]! <= start.latestMs + CLOCK_MARGIN_MS;
  }

  /** Whether the run on `slot` launched at `at` was going on when `start` was sent, and may have ended first. */
  private ranDuring(slot: number, at: number, start: StartRecord): boolean {
    return start.at > at && start.running.includes(slot) && this.mayHaveEnded(slot, start);
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

  /**
   * One read of `/slots` after an abort (abort-read-back.ts): idle once every slot not running here is
   * idle at the server. It holds the launch lock, like every read before a start, so starts and reads
   * reach the server in the mirror's order. A slot still busy when the reads end, or a failed read,
   * leaves the flag set: the next run reads again.
   */
  private async readAborted(): Promise<ReadVerdict> {
    const unlock = await this.launches.lock();
    try {
      const slots = await readSlots(this.http, this.slotsEndpoint);
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
        const slots = await readSlots(this.http, this.slotsEndpoint);
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

  private applySlots(slots: ServerSlots): void {
    this.resyncs++;
    // The worlds change here: a start's saved worlds can no longer be replayed.
    if (this.lastStart) this.lastStart.before = [];
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
