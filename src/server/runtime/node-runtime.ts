/**
 * The runtime around the pure PrefixNode: it performs the node's effects with real timers, the peer
 * transport and the engine, and feeds their outcomes back as inputs. It is also the NodeService the
 * HTTP API calls: each client request becomes one `client-request` input and is answered exactly once,
 * by the node's `reply` effect.
 *
 * Streaming: engine output is routed by the EngineRequest object the node hands to `engine-run` (the
 * same object that came in with the client request or the forward), to the client or to the forward
 * stream of the peer that sent it.
 */
import type { Engine, EngineRequest, EngineResult } from "../../core/engine.js";
import type { PrefixNode } from "../../core/node/node.js";
import {
  type Effect,
  type NodeInput,
  type PeerMessage,
  type ReplyOutcome,
  timerKey,
} from "../../core/node/types.js";
import type { Snapshot } from "../../core/snapshot.js";
import type { IncomingMessage, PeerServerHandlers } from "../../net/peer-handlers.js";
import type { ForwardReplyStream } from "../../net/reply-stream.js";
import type { PeerClient } from "../../net/transport-client.js";
import { TransportError } from "../../net/transport-client.js";
import {
  type ForwardMsg,
  type PeerHello,
  PROMPT_TEXT_NEEDED,
  PROTOCOL_VERSION,
  type ReplyMsg,
} from "../../net/transport-wire.js";
import type { NodeMetrics } from "../metrics.js";
import {
  type ClientLink,
  type InferenceInput,
  type NodeService,
  type ServeEvents,
  type ServeOutcome,
  ServiceError,
} from "../service.js";

export interface SnapshotCodec {
  encode(s: Snapshot): Uint8Array;
  decode(bytes: Uint8Array): Snapshot;
}

export interface RuntimeLogger {
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

export interface NodeRuntimeOptions {
  node: PrefixNode;
  engine: Engine;
  client: PeerClient;
  codec: SnapshotCodec;
  metrics: NodeMetrics;
  logger: RuntimeLogger;
  clusterId: string;
  /** Peer id → peer URL (for the cluster view). */
  peerUrls: Map<string, string>;
  /** Client requests admitted at once (queued + running + forwarded); beyond it: 429. */
  maxPending?: number;
  /** Longest a forward's answer stream stays open (well past the origin's forward timeout). */
  forwardStreamTtlMs?: number;
  /** Policy names the node accepts (for the admin switch). */
  policies?: readonly string[];
  /** Monotonic ms (default: wall-clock origin + performance.now()). */
  now?: () => number;
  /** The PM QoS CPU latency limit this node holds (`--cpu-latency-us`), for the cluster view. */
  cpuLatencyUs?: number;
}

interface ClientSlot {
  /** The node's request object: the key of this client's output sink. */
  request: EngineRequest;
  events: ServeEvents;
  resolve(o: ServeOutcome): void;
  reject(e: Error): void;
  /** Which node produced the output already relayed (streaming), if any. */
  relayedFrom: string | undefined;
  /** All text relayed to the client so far. */
  sent: string;
  /** After a fallback: how much of `sent` the new source has reproduced so far (see relay). */
  replayed: number;
  /** Greedy decoding (temperature 0): the same model gives the same text on any node. */
  greedy: boolean;
  done: boolean;
}

type Sink = { kind: "client"; reqId: string } | { kind: "forward"; stream: ForwardReplyStream };

/** A forward we serve whose answer stream is still open. */
interface ServedForward {
  stream: ForwardReplyStream;
  /**
   * Streams of the same forward sent again while this one was open: an origin that re-sends an
   * unanswered forward (`forwardResends` > 0; the daemon's own nodes leave it at 0). The node acks on
   * the newest — a stream acks once — and its one answer finishes them all.
   */
  resent?: ForwardReplyStream[];
  /** The forwarded request object: the key of this forward's output sink. */
  request: EngineRequest;
  reqId: string;
  attempt: number;
  /** When a stream the node never answered is closed (see sweepStreams). */
  expiresAt: number;
}

const nowDefault = () => performance.timeOrigin + performance.now();

export class NodeRuntime implements NodeService {
  readonly nodeId: string;
  readonly modelId: string;
  readonly maxContextTokens: number;
  private readonly node: PrefixNode;
  private readonly engine: Engine;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly clients = new Map<string, ClientSlot>();
  /** Open answer streams of forwards we serve, by `${from}|${reqId}|${attempt}`. */
  private readonly streams = new Map<string, ServedForward>();
  /**
   * Where each running request's output goes. Weak, so a corner case that never answers leaks
   * nothing; deleted as soon as the answer is given all the same, so the common case leaves no
   * ephemeron for the scavenger to trace (it kept each forward's graph alive a while longer).
   */
  private readonly sinks = new WeakMap<EngineRequest, Sink>();
  private readonly snapshotInFlight = new Set<string>();
  /** Peers whose hello showed another cluster/model/id: never talked to. */
  private readonly refused = new Map<string, string>();
  private readonly engineJobs = new Set<Promise<void>>();
  private seq = 0;
  private engineHealth: { ok: boolean; detail?: string } = { ok: true };
  private healthTimer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  /** How long an unanswered forward's stream stays open (see sweepStreams). */
  private readonly streamTtlMs: number;
  private started = false;
  private stopping = false;
  private readonly now: () => number;
  private readonly maxPending: number;
  private discoveryView: (() => unknown) | undefined;

  constructor(private readonly o: NodeRuntimeOptions) {
    this.node = o.node;
    this.engine = o.engine;
    this.nodeId = o.node.id;
    this.modelId = o.engine.info.model;
    this.maxContextTokens = o.engine.info.maxContextTokens;
    this.now = o.now ?? nowDefault;
    this.maxPending = o.maxPending ?? 256;
    this.streamTtlMs = o.forwardStreamTtlMs ?? 120_000;
    o.metrics.setViewProvider(() => {
      const now = this.now();
      return {
        treeTokens: this.node.treeSize(),
        queueDepth: this.node.queueDepth(),
        pushBackActive: this.node.currentPushBackMs() > 0,
        peers: this.node.peers().map((p) => ({
          peer: p.id,
          suspected: p.liveness !== "live",
          ...(p.silentMs !== undefined ? { estimateAgeSec: p.silentMs / 1000 } : {}),
          estimateTokens: p.estimateTokens,
          pushBackActive: p.pushBackUntil > now,
        })),
        forwardEvents: forwardEvents(this.node.stats()),
      };
    });
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.applyAll(this.node.start());
    // /ready reflects the engine's own health check, refreshed in the background (never per request).
    const check = () =>
      this.engine.health().then(
        (h) => {
          this.engineHealth = h;
        },
        (err: Error) => {
          this.engineHealth = { ok: false, detail: err.message };
        },
      );
    void check();
    this.healthTimer = setInterval(check, 5_000);
    this.healthTimer.unref?.();
    this.sweepTimer = setInterval(
      () => this.sweepStreams(),
      Math.min(5_000, Math.max(20, this.streamTtlMs / 4)),
    );
    this.sweepTimer.unref?.();
  }

  // ------------------------------------------------------------------ NodeService (client API)

  tokenize(text: string) {
    return this.engine.tokenize(text);
  }

  applyChatTemplate(messages: Parameters<Engine["applyChatTemplate"]>[0]) {
    return this.engine.applyChatTemplate(messages);
  }

  submit(input: InferenceInput, events: ServeEvents, link: ClientLink): Promise<ServeOutcome> {
    if (this.stopping || !this.started) {
      return Promise.reject(new ServiceError(503, "server_error", "node is shutting down", 1));
    }
    if (this.clients.size >= this.maxPending) {
      // Retry-After: roughly when the queue ahead should have drained at the current pace.
      return Promise.reject(
        new ServiceError(429, "rate_limit_error", "node overloaded: too many requests in flight", 1),
      );
    }
    const reqId = `${this.nodeId}-${this.node.currentEpoch}-${++this.seq}`;
    const request: EngineRequest = {
      id: reqId,
      tokens: input.tokens,
      prompt: input.prompt,
      maxTokens: input.maxTokens,
    };
    if (input.temperature !== undefined) request.temperature = input.temperature;
    if (input.topP !== undefined) request.topP = input.topP;
    if (input.seed !== undefined) request.seed = input.seed;
    if (input.stop) request.stop = input.stop;
    return new Promise<ServeOutcome>((resolve, reject) => {
      const slot: ClientSlot = {
        request,
        events,
        resolve,
        reject,
        relayedFrom: undefined,
        sent: "",
        replayed: 0,
        greedy: (request.temperature ?? 0) === 0,
        done: false,
      };
      this.clients.set(reqId, slot);
      this.sinks.set(request, { kind: "client", reqId });
      link.onGone = this.hangUpHandler(reqId);
      this.feed({ type: "client-request", reqId, request });
    });
  }

  /**
   * What a client hanging up does: the node has no cancel input, so the client just stops listening
   * and its answer is dropped. Made here, not inline in `submit`: a closure there would share
   * submit's context — the request, the API's events, and through them the whole HTTP exchange — and
   * kept that alive past its answer, so every scavenge copied ~2.7 MB and paused 5–9 ms instead of
   * 1–3 (BENCHMARKS.md, "Router overhead").
   */
  private hangUpHandler(reqId: string): () => void {
    return () => this.finishClient(reqId, new ServiceError(499, "aborted", "client gone"));
  }

  ready() {
    if (!this.started) return { ok: false, detail: "starting" };
    if (this.stopping) return { ok: false, detail: "shutting down" };
    if (!this.engineHealth.ok)
      return { ok: false, detail: `engine: ${this.engineHealth.detail ?? "unhealthy"}` };
    return { ok: true };
  }

  /** True once shutdown has begun. */
  get isStopping(): boolean {
    return this.stopping;
  }

  setPolicy(name: string): void {
    if (this.o.policies && !this.o.policies.includes(name)) {
      throw new ServiceError(
        400,
        "invalid_request_error",
        `unknown policy '${name}' (one of ${this.o.policies.join(", ")})`,
      );
    }
    this.node.setPolicy(name as Parameters<PrefixNode["setPolicy"]>[0]);
    this.o.logger.info({ policy: name }, "routing policy switched");
  }

  clusterView() {
    const now = this.now();
    const s = this.node.stats();
    return {
      id: this.nodeId,
      cluster: this.o.clusterId,
      model: this.modelId,
      engine: this.engine.info.kind,
      policy: this.node.policyName,
      epoch: this.node.currentEpoch,
      treeTokens: this.node.treeSize(),
      treeVersion: this.node.treeVersion(),
      capacityTokens: this.engine.info.capacityTokens,
      queueDepth: this.node.queueDepth(),
      pushBackActive: this.node.currentPushBackMs() > 0,
      // null: the machine's own setting (idle CPUs may halt).
      cpuLatencyUs: this.o.cpuLatencyUs ?? null,
      inFlightClients: this.clients.size,
      served: s.servedLocal + s.servedForPeers,
      stats: s,
      peers: this.node.peers().map((p) => ({
        id: p.id,
        url: this.o.peerUrls.get(p.id),
        liveness: p.liveness,
        suspected: p.liveness !== "live",
        estimateTokens: p.estimateTokens,
        estimateAgeMs: p.silentMs,
        held: p.held,
        holdsOfUs: p.holdsOfUs,
        queueDepth: p.queueDepth,
        pushBackActive: p.pushBackUntil > now,
        pushBackUntil: p.pushBackUntil,
        rttMs: p.rttMs,
        /** Forwards to it carry the prompt text (false once its hello said its engine needs tokens only). */
        promptText: this.o.client.sendsPromptText(p.id),
      })),
      ...(this.discoveryView ? { discovery: this.discoveryView() } : {}),
    };
  }

  // ------------------------------------------------------------------ peer server handlers

  peerHandlers(): PeerServerHandlers {
    return {
      hello: (): PeerHello => ({
        id: this.nodeId,
        cluster: this.o.clusterId,
        model: this.modelId,
        protocol: PROTOCOL_VERSION,
        promptText: this.engine.info.needsPromptText,
      }),
      isKnownPeer: (id) => this.o.peerUrls.has(id) && !this.refused.has(id),
      onSnapshot: (from, bytes, meta) => {
        const snapshot = this.o.codec.decode(bytes); // throws → 400, never reaches the node
        this.o.metrics.gossipBytes.inc({ peer: from, direction: "in" }, bytes.byteLength);
        const msg: PeerMessage = { type: "snapshot", snapshot };
        if (meta.holds) msg.holds = meta.holds;
        if (meta.blocks !== undefined) msg.blocks = meta.blocks;
        if (meta.at !== undefined) msg.at = meta.at;
        if (meta.echo) msg.echo = meta.echo;
        this.feed({ type: "peer-message", from, msg });
      },
      onForward: (from, msg, stream) => {
        if (this.stopping) {
          stream.finish(retryableError(msg, "shutting down"));
          return;
        }
        if (msg.request.prompt === undefined && this.engine.info.needsPromptText) {
          // Refused before the node sees it, so the origin's re-send with the text is not a duplicate.
          stream.finish(retryableError(msg, PROMPT_TEXT_NEEDED));
          return;
        }
        const key = streamKey(from, msg.reqId, msg.attempt);
        const open = this.streams.get(key);
        if (open) {
          // The node will see a duplicate: it never runs this copy, and the first one's output and
          // answer are the only ones coming. Replacing the first stream here left it open for good.
          if (open.resent) open.resent.push(stream);
          else open.resent = [stream];
        } else {
          this.streams.set(key, {
            stream,
            request: msg.request,
            reqId: msg.reqId,
            attempt: msg.attempt,
            expiresAt: this.now() + this.streamTtlMs,
          });
          this.sinks.set(msg.request, { kind: "forward", stream });
        }
        this.feed({ type: "peer-message", from, msg });
      },
      onMessage: (from, msg: IncomingMessage) => {
        // A cancel the node acts on makes it answer the forward's stream itself (FORWARD_CANCELLED).
        this.feed({ type: "peer-message", from, msg: msg as PeerMessage });
      },
      onAuthRejected: (reason) => {
        this.o.metrics.authRejected.inc({ reason });
        this.o.logger.warn({ reason }, "peer request refused by authentication");
      },
    };
  }

  /** Ends forward `key`'s answer stream with `reply`; false if it is not open (any more). */
  private answerForward(key: string, reply: ReplyMsg): boolean {
    const served = this.streams.get(key);
    if (!served) return false;
    this.streams.delete(key);
    this.sinks.delete(served.request);
    served.stream.finish(reply);
    if (served.resent) for (const s of served.resent) s.finish(reply);
    return true;
  }

  /**
   * The node may drop a forward without answering (e.g. a duplicate); its origin gave up on it after
   * the forward timeout, so a stream still open past its TTL is closed here. One sweep for all streams
   * rather than a timer per forward: a timer per forward was allocated, and cleared, on every one.
   */
  private sweepStreams(): void {
    const now = this.now();
    for (const [key, served] of [...this.streams]) {
      if (served.expiresAt <= now) this.answerForward(key, retryableError(served, "not answered"));
    }
  }

  /**
   * Empties the cache and starts a new epoch, exactly like a crash-restart (§2) but without losing
   * the process: peers replace their estimate of us on our next snapshot. Only when idle.
   */
  async resetCache(): Promise<void> {
    if (this.clients.size > 0 || this.node.queueDepth() > 0) {
      throw new ServiceError(409, "invalid_request_error", "node is busy; reset only between runs");
    }
    if (this.engine.info.cacheMode === "node-managed") {
      // The tree is about to be replaced; free exactly what it holds in the engine first.
      const tree = this.node.localTree();
      const runs = tree.evict(tree.size);
      if (runs.length > 0) this.engine.evict?.(runs);
    } else {
      const reset = this.engine.resetCache;
      if (!reset)
        throw new ServiceError(501, "server_error", `engine ${this.engine.info.kind} cannot drop its cache`);
      await reset.call(this.engine);
    }
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.applyAll(this.node.restart(Date.now()));
    this.o.logger.info({ epoch: this.node.currentEpoch }, "cache reset: new epoch");
  }

  /** Stops all traffic with a peer that proved to be from another cluster or model. */
  refusePeer(id: string, reason: string): void {
    this.refused.set(id, reason);
  }

  /** Adds what peer discovery sees (e.g. each DNS address and its status) to `/cluster`. */
  setDiscoveryView(fn: () => unknown): void {
    this.discoveryView = fn;
  }

  /** True if `id` is a member now (static or admitted at run time). */
  hasPeer(id: string): boolean {
    return this.o.peerUrls.has(id);
  }

  /**
   * Admits a peer found at run time (its hello already checked): a transport pool pinned to its id,
   * then the node's `addPeer`. False if the node refuses it (membership full, already a member).
   */
  addPeer(id: string, url: string, hello: { promptText?: boolean | undefined }): boolean {
    if (this.stopping || this.o.peerUrls.has(id) || !this.node.addPeer(id)) return false;
    this.o.client.setPeer(id, url);
    this.o.peerUrls.set(id, url);
    this.notePeerHello(id, hello);
    this.o.logger.info({ peer: id, url }, "peer added");
    return true;
  }

  /**
   * What a peer's (checked) hello tells the transport: whether its engine needs the prompt text. Until
   * a hello says otherwise, forwards carry it (a peer that takes text cannot run without it).
   */
  notePeerHello(id: string, hello: { promptText?: boolean | undefined }): void {
    this.o.client.setPromptText(id, hello.promptText !== false);
  }

  /** Points a member at another address (its old one vanished, another still announces its id). */
  movePeer(id: string, url: string): void {
    if (!this.o.peerUrls.has(id)) return;
    this.o.client.setPeer(id, url);
    this.o.peerUrls.set(id, url);
    this.o.logger.info({ peer: id, url }, "peer moved");
  }

  /**
   * Removes a member (gone from DNS, or its address now answers with another id): the node drops its
   * estimate and fails pending forwards over at once; then its pool is closed.
   */
  removePeer(id: string, why: string): void {
    if (!this.o.peerUrls.has(id)) return;
    this.o.peerUrls.delete(id);
    this.applyAll(this.node.removePeer(id));
    this.o.client.removePeer(id);
    this.snapshotInFlight.delete(id);
    this.o.logger.info({ peer: id, why }, "peer removed");
  }

  // ------------------------------------------------------------------ shutdown

  /**
   * Graceful leave: refuse new work, tell peers (goodbye) so they stop routing here, let in-flight work
   * finish within `drainMs`, then hand back what is left (retryable errors: origins fall back).
   */
  async shutdown(drainMs: number): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    const goodbyes = this.node
      .goodbye()
      .map((e) =>
        e.type === "send" ? this.o.client.sendMessage(e.to, { type: "goodbye" }).catch(() => {}) : undefined,
      );
    await Promise.all(goodbyes);
    const deadline = this.now() + drainMs;
    while ((this.clients.size > 0 || this.node.queueDepth() > 0) && this.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    for (const [key, served] of [...this.streams]) {
      this.answerForward(key, retryableError(served, "shutting down"));
    }
    for (const reqId of [...this.clients.keys()]) {
      this.finishClient(reqId, new ServiceError(503, "server_error", "node shut down before answering"));
    }
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    if (this.healthTimer) clearInterval(this.healthTimer);
    if (this.sweepTimer) clearInterval(this.sweepTimer);
  }

  // ------------------------------------------------------------------ effects

  private feed(input: NodeInput): void {
    let effects: Effect[];
    try {
      effects = this.node.handle(input);
    } catch (err) {
      // A bug in the node must not take the process down with every client connection.
      this.o.logger.error({ err, input: input.type }, "node failed to handle input");
      return;
    }
    this.applyAll(effects);
  }

  private applyAll(effects: Effect[]): void {
    for (const e of effects) {
      try {
        this.apply(e);
      } catch (err) {
        this.o.logger.error({ err, effect: e.type }, "failed to apply effect");
      }
    }
  }

  private apply(e: Effect): void {
    switch (e.type) {
      case "set-timer": {
        const key = timerKey(e.timer);
        const old = this.timers.get(key);
        if (old) clearTimeout(old);
        const t = setTimeout(
          () => {
            this.timers.delete(key);
            if (!this.stopping || e.timer.kind !== "poll") this.feed({ type: "timer", timer: e.timer });
          },
          Math.max(0, e.delayMs),
        );
        t.unref?.();
        this.timers.set(key, t);
        return;
      }
      case "cancel-timer": {
        const key = timerKey(e.timer);
        const t = this.timers.get(key);
        if (t) clearTimeout(t);
        this.timers.delete(key);
        return;
      }
      case "reply":
        this.onReply(e.reqId, e.outcome, e.record);
        return;
      case "engine-run":
        this.runEngine(e.jobId, e.request, e.evicted);
        return;
      case "send":
        this.send(e.to, e.msg);
        return;
    }
  }

  private onReply(
    reqId: string,
    outcome: ReplyOutcome,
    record: Extract<Effect, { type: "reply" }>["record"],
  ): void {
    const m = this.o.metrics;
    m.predictedCached.inc(record.predictedHitTokens);
    if (outcome.ok) {
      m.actualCached.inc(outcome.result.cachedTokens);
      const slot = this.clients.get(reqId);
      // A fallback that stopped short of what the client was already sent cannot be its answer.
      if (slot && slot.replayed < slot.sent.length) {
        this.failMidStream(reqId, slot);
        return;
      }
      this.finishClient(reqId, undefined, {
        reqId,
        result: outcome.result,
        servedBy: record.servedBy ?? this.nodeId,
        hops: record.hops,
        timing: record, // its queueMs … totalMs are the breakdown
        fallbacks: record.fallbacks,
      });
    } else {
      const status = outcome.code === "overloaded" ? 429 : outcome.code === "invalid" ? 400 : 502;
      const type =
        status === 429 ? "rate_limit_error" : status === 400 ? "invalid_request_error" : "server_error";
      this.finishClient(reqId, new ServiceError(status, type, outcome.error, status === 429 ? 1 : undefined));
    }
    this.o.logger.debug({ record }, "request done");
  }

  private finishClient(reqId: string, err: Error | undefined, ok?: ServeOutcome): void {
    const slot = this.clients.get(reqId);
    if (!slot || slot.done) return;
    slot.done = true;
    this.clients.delete(reqId);
    this.sinks.delete(slot.request);
    if (err) slot.reject(err);
    else if (ok) slot.resolve(ok);
  }

  /** Output produced for `request` by node `source`, to whoever waits for it. */
  private relay(request: EngineRequest, source: string, text: string): void {
    const sink = this.sinks.get(request);
    if (!sink) return;
    if (sink.kind === "forward") {
      sink.stream.chunk(text);
      return;
    }
    const slot = this.clients.get(sink.reqId);
    // A client taking the answer whole gets it from the reply: nothing to relay, splice or refuse.
    if (!slot?.events.onChunk) return;
    // Only the attempt the node waits for now may speak: a peer we fell back from (slow, not dead)
    // may still stream its answer, which the client must not see.
    if (this.node.servingNow(sink.reqId) !== source) return;
    if (slot.relayedFrom !== undefined && slot.relayedFrom !== source) {
      // A fallback after partial output. Under greedy decoding the new node produces the same text
      // (same model on every node), so the client's stream goes on from where it stopped: the new
      // source's output is checked against what was sent and only what is new is relayed. Sampling,
      // or any disagreement, cannot be spliced: the stream ends with an error instead.
      if (!slot.greedy) {
        this.failMidStream(sink.reqId, slot);
        return;
      }
      slot.replayed = 0;
    }
    slot.relayedFrom = source;
    let fresh = text;
    if (slot.replayed < slot.sent.length) {
      const overlap = Math.min(text.length, slot.sent.length - slot.replayed);
      if (text.slice(0, overlap) !== slot.sent.slice(slot.replayed, slot.replayed + overlap)) {
        this.failMidStream(sink.reqId, slot);
        return;
      }
      slot.replayed += overlap;
      fresh = text.slice(overlap);
    }
    if (fresh.length === 0) return;
    slot.sent += fresh;
    slot.replayed = slot.sent.length;
    slot.events.onChunk(fresh, source);
  }

  private failMidStream(reqId: string, slot: ClientSlot): void {
    this.finishClient(
      reqId,
      new ServiceError(
        502,
        "server_error",
        `node ${slot.relayedFrom} failed mid-stream after partial output`,
      ),
    );
  }

  private runEngine(
    jobId: string,
    request: EngineRequest,
    evicted: Extract<Effect, { type: "engine-run" }>["evicted"],
  ): void {
    if (evicted.length > 0) this.engine.evict?.(evicted);
    const sink = this.sinks.get(request);
    if (sink?.kind === "forward") this.o.metrics.served.inc({ origin: "peer" });
    else this.o.metrics.served.inc({ origin: "self" });
    const job = this.engine
      .run(request, (c) => this.relay(request, this.nodeId, c.text))
      .then(
        (result: EngineResult) => this.feed({ type: "engine-done", jobId, result }),
        (err: Error) => {
          this.o.logger.warn({ err: err?.message, jobId }, "engine run failed");
          this.feed({ type: "engine-failed", jobId, error: err?.message ?? String(err) });
        },
      );
    this.engineJobs.add(job);
    void job.finally(() => this.engineJobs.delete(job));
  }

  private send(to: string, msg: PeerMessage): void {
    if (this.refused.has(to)) {
      // Not deliverable by policy: the node treats it like an unreachable peer.
      const reason = this.refused.get(to) ?? "refused";
      queueMicrotask(() => this.feed({ type: "send-failed", to, msg, reason }));
      return;
    }
    switch (msg.type) {
      case "snapshot":
        this.sendSnapshot(to, msg);
        return;
      case "forward":
        this.sendForward(to, msg);
        return;
      case "result":
      case "error": {
        if (this.answerForward(streamKey(to, msg.reqId, msg.attempt), msg)) return;
        this.o.client.sendMessage(to, msg).catch((err) => this.sendFailed(to, msg, err));
        return;
      }
      case "goodbye":
        this.o.client.sendMessage(to, msg).catch(() => {});
        return;
      case "cancel":
        // Best effort: a lost cancel only costs the peer the work (an old peer answers 400).
        this.o.client.sendMessage(to, msg).catch(() => {});
        return;
      case "forward-ack": {
        // On the forward's own answer stream (deferred: a quick answer makes it unnecessary). Without
        // an open stream there is nobody to tell: the origin falls back after its ack timeout.
        const served = this.streams.get(streamKey(to, msg.reqId, msg.attempt));
        (served?.resent?.at(-1) ?? served?.stream)?.ack();
        return;
      }
      default: {
        const unhandled: never = msg;
        this.o.logger.error({ msg: unhandled }, "no transport for this peer message");
      }
    }
  }

  /** Encoded bytes per snapshot object; weak, so a round's snapshots go with the round. */
  private readonly encoded = new WeakMap<object, Uint8Array>();

  private sendSnapshot(to: string, msg: Extract<PeerMessage, { type: "snapshot" }>): void {
    // Anti-entropy tolerates loss: with one still in flight to a slow peer, skip this round for it.
    if (this.snapshotInFlight.has(to)) return;
    // A round hands every peer the same snapshot object (one full, one delta per base, one heartbeat):
    // encode each once, not once per peer.
    let bytes = this.encoded.get(msg.snapshot);
    if (bytes === undefined) {
      bytes = this.o.codec.encode(msg.snapshot);
      this.encoded.set(msg.snapshot, bytes);
    }
    if (msg.snapshot.header.pushBackMs > 0) this.o.metrics.pushBack.inc();
    this.snapshotInFlight.add(to);
    this.o.client
      .sendSnapshot(to, bytes, { holds: msg.holds, blocks: msg.blocks, at: msg.at, echo: msg.echo })
      .then(
        () => this.o.metrics.gossipBytes.inc({ peer: to, direction: "out" }, bytes.byteLength),
        (err) => this.sendFailed(to, msg, err),
      )
      .finally(() => this.snapshotInFlight.delete(to));
  }

  private sendForward(to: string, msg: ForwardMsg): void {
    // The transport's ack carries no ETA: the answer comes back on the same reliable stream, so the
    // node needs no probes for it — a broken stream is reported as a failure at once.
    const onAck = () =>
      this.feed({
        type: "peer-message",
        from: to,
        msg: { type: "forward-ack", reqId: msg.reqId, attempt: msg.attempt },
      });
    this.o.client
      .forward(to, msg, (text) => this.relay(msg.request, to, text), onAck)
      .then(
        (reply: ReplyMsg) => this.feed({ type: "peer-message", from: to, msg: reply }),
        (err) => {
          if (err instanceof TransportError && (err.kind === "http" || err.kind === "protocol")) {
            // The peer is up but refused or garbled it: fall back without suspecting the peer.
            this.o.logger.warn({ peer: to, err: err.message }, "forward refused");
            this.feed({ type: "peer-message", from: to, msg: retryableError(msg, err.message) });
            return;
          }
          this.sendFailed(to, msg, err);
        },
      );
  }

  private sendFailed(to: string, msg: PeerMessage, err: unknown): void {
    const kind = err instanceof TransportError ? err.kind : "connection";
    this.o.metrics.peerFailures.inc({ peer: to, reason: kind });
    if (kind === "http" || kind === "protocol") {
      this.o.logger.warn({ peer: to, msg: msg.type, err: (err as Error).message }, "peer refused message");
      return;
    }
    this.o.logger.debug({ peer: to, msg: msg.type, kind, err: (err as Error)?.message }, "peer send failed");
    this.feed({ type: "send-failed", to, msg, reason: `${kind}: ${(err as Error)?.message ?? ""}` });
  }
}

function streamKey(peer: string, reqId: string, attempt: number): string {
  return `${peer}|${reqId}|${attempt}`;
}

/** An error answer to a forward that the origin may retry elsewhere. */
function retryableError(f: { reqId: string; attempt: number }, error: string): ReplyMsg {
  return { type: "error", reqId: f.reqId, attempt: f.attempt, error, retryable: true };
}

/** The node's forwarding counters under Prometheus-style names (prefixmesh_forward_events{event}). */
function forwardEvents(s: ReturnType<PrefixNode["stats"]>): Record<string, number> {
  return {
    forwarded: s.forwarded,
    fallback: s.fallbacks,
    ack_timeout: s.ackTimeouts,
    late_reply: s.lateReplies,
    duplicate_forward: s.duplicateForwards,
    cancelled_forward: s.cancelledForwards,
  };
}
