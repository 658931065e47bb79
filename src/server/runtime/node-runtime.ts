/**
 * The effect interpreter around the pure PrefixNode, the daemon's equivalent of the simulator's event
 * loop (src/sim/run.ts): it feeds the node its inputs and performs its effects with real timers, the
 * engine and the peer transport, feeding their outcomes back as inputs. It is also the NodeService the
 * HTTP API calls: each client request becomes one `client-request` input and is answered exactly once,
 * by the node's `reply` effect.
 *
 * Every decision that spans rooms is made here; each room owns its own state:
 *  - client-streams.ts: the clients waiting for an answer, and a streaming client's splice;
 *  - client-replies.ts: the node's `reply` effect, answering a client;
 *  - served-forwards.ts: the answer streams of forwards this node serves;
 *  - peer-sender.ts: messages to peers, and what became of them;
 *  - peer-traffic.ts: what arrives from peers, and the channel each message to a peer takes;
 *  - cluster-view.ts: `/cluster` and the metrics view;
 *  - admin.ts: admin calls, membership changes, hello;
 *  - engine-step-errors.ts: an engine's failed tokenize or chat-template step, as the client's error;
 *  - transport-rules.ts: the protocol rules the daemon's transport adds to the core's.
 *
 * Streaming: engine output goes by the EngineRequest object of `engine-run` (the one the client request
 * or the forward brought) to the client or to the sending peer's forward stream; a peer's output for
 * our forward goes back to the node too (`forward-output`: it is at work, forward-acks.ts `streamed`).
 */
import type { Engine, EngineRequest } from "../../core/engine.js";
import type { PrefixNode } from "../../core/node/node.js";
import type { Effect, NodeInput } from "../../core/node/types.js";
import type { PeerServerHandlers } from "../../net/peer-handlers.js";
import type { PeerClient } from "../../net/transport-client.js";
import type { NodeMetrics } from "../metrics.js";
import { logServedForward } from "../observability/forward-log.js";
import { LivenessLog } from "../observability/liveness-log.js";
import type {
  Admission,
  ClientLink,
  InferenceInput,
  NodeService,
  ServeEvents,
  ServeOutcome,
} from "../service.js";
import { Admin } from "./admin.js";
import { admissionError, ClientIntake, intakePhase } from "./client-admission.js";
import { replyToClient } from "./client-replies.js";
import { ClientStreams, engineRequestOf } from "./client-streams.js";
import { ClusterView } from "./cluster-view.js";
import { watchEngineCache } from "./engine-cache-watch.js";
import { EngineHealth } from "./engine-health.js";
import { EngineRuns } from "./engine-runs.js";
import { shutDownError } from "./engine-step-errors.js";
import { EngineSteps } from "./engine-steps.js";
import type { RuntimeLogger } from "./logger.js";
import { type MeshModel, meshModels, peerModels } from "./mesh-models.js";
import { MeshPeers, movesMembers } from "./mesh-peers.js";
import { PeerSender } from "./peer-sender.js";
import { PeerTraffic, type PeerTrafficOptions } from "./peer-traffic.js";
import { ServedForwards } from "./served-forwards.js";
import { isPollTimer, type NodeTimer, TimerTable } from "./timers.js";
import { mayReachClient } from "./transport-rules.js";

export interface NodeRuntimeOptions extends Pick<PeerTrafficOptions, "maxPeerTokenizing"> {
  node: PrefixNode;
  engine: Engine;
  client: PeerClient;
  metrics: NodeMetrics;
  logger: RuntimeLogger;
  clusterId: string;
  /** Peer id → peer URL (for the cluster view). */
  peerUrls: Map<string, string>;
  /** Client requests admitted at once (tokenizing + queued + running + forwarded); beyond it: 429. */
  maxPending?: number;
  /** Longest a request's chat template or tokenize may take at the engine (then 504). */
  tokenizeTimeoutMs?: number;
  /** Longest a forward's answer stream stays open (well past the origin's forward timeout). */
  forwardStreamTtlMs?: number;
  /** Largest max_tokens a peer's forward may ask (`--max-tokens-ceiling`); none: no bound. */
  maxTokensCeiling?: number;
  /** Policy names the node accepts (for the admin switch). */
  policies?: readonly string[];
  /** Monotonic ms (default: wall-clock origin + performance.now()). */
  now?: () => number;
  /** LoRA adapters the engine serves (`--adapters`): requests name them as their model. */
  adapters?: readonly string[];
  /** The PM QoS CPU latency limit this node holds (`--cpu-latency-us`), for the cluster view. */
  cpuLatencyUs?: number;
  /** gossip "scuttlebutt" (mesh-peers.ts): the model members must serve, the largest mesh message. */
  mesh?: { helloModel: string | undefined; maxMessageBytes: number; admitsNone?: boolean };
}

const nowDefault = () => performance.timeOrigin + performance.now();

export class NodeRuntime implements NodeService {
  readonly nodeId: string;
  readonly modelId: string;
  readonly adapters: readonly string[];
  readonly maxContextTokens: number;
  /** Admin and membership calls that need nothing else (refuse, move, hello news); see also below. */
  readonly admin: Admin;
  private readonly node: PrefixNode;
  private readonly engine: Engine;
  private readonly now: () => number;
  private readonly maxPending: number;
  private readonly timers = new TimerTable();
  private readonly clients = new ClientStreams((gone) => this.feed(gone));
  private readonly served: ServedForwards;
  private readonly sender: PeerSender;
  private readonly traffic: PeerTraffic;
  /** `/cluster` and the gauges; start-node.ts adds what discovery and the seeds see. */
  readonly view: ClusterView;
  private readonly health: EngineHealth;
  private readonly runs: EngineRuns;
  private readonly liveness: LivenessLog;
  /** The chat template and tokenize, bounded in time, a failure as the client's error (engine-steps.ts). */
  private readonly steps: EngineSteps;
  /** gossip "scuttlebutt": its transport, seeds, verification (mesh-peers.ts). */
  readonly mesh: MeshPeers | undefined;
  private unwatchCache: () => void = () => {};
  private seq = 0;
  private started = false;
  private stopping = false;
  private readonly intake = new ClientIntake();
  /** `resetCache` is emptying the engine's cache: clients are refused until the restart is done. */
  private resetting = false;

  constructor(private readonly o: NodeRuntimeOptions) {
    this.node = o.node;
    this.engine = o.engine;
    this.nodeId = o.node.id;
    this.modelId = o.engine.info.model;
    this.adapters = o.adapters ?? [];
    this.maxContextTokens = o.engine.info.maxContextTokens;
    this.now = o.now ?? nowDefault;
    this.maxPending = o.maxPending ?? 256;
    this.served = new ServedForwards(o.forwardStreamTtlMs ?? 120_000, (f, reply) =>
      logServedForward(o.logger, f, reply, this.now()),
    );
    this.health = new EngineHealth(o.engine);
    this.runs = new EngineRuns({
      ...o,
      feed: (input) => this.feed(input),
      relay: (request, text) => this.relay(request, this.nodeId, text),
      forPeer: (request) => this.served.serves(request),
    });
    this.liveness = new LivenessLog(o.logger);
    this.steps = new EngineSteps({ ...o, now: this.now, isStopping: () => this.stopping });
    this.admin = new Admin(o);
    this.sender = new PeerSender({
      ...o,
      deliver: (input, on) => this.clients.answering(on, () => this.feed(input)),
      relay: (request, source, text, stream) => this.relay(request, source, text, stream),
    });
    this.traffic = new PeerTraffic({
      ...o,
      steps: this.steps,
      admin: this.admin,
      served: this.served,
      sender: this.sender,
      now: this.now,
      isStopping: () => this.stopping,
      feed: (input) => this.feed(input),
      ownServed: () => this.view.ownServed(),
    });
    this.view = new ClusterView({
      ...o,
      now: this.now,
      protocols: this.admin.protocols,
      peerServed: (id) => this.traffic.servedCounts.of(id),
      peerUrl: (id) => this.admin.peerUrl(id),
      sendsPromptText: (id) => o.client.sendsPromptText(id),
      meshRefused: () => ({
        invalid: this.mesh?.refusedMessages ?? 0,
        unsupported: this.mesh?.unsupportedMessages ?? 0,
      }),
    });
    o.metrics.setViewProvider(() => this.view.gauges());
    const mesh = o.node.config.gossip === "scuttlebutt" ? o.mesh : undefined;
    const report = (from: string, epoch: number, n: number | undefined) =>
      from !== this.nodeId && this.traffic.servedCounts.report(from, epoch, n);
    const keepOnly = (remembered: ReadonlySet<string>) => this.traffic.servedCounts.keepOnly(remembered);
    const served = { own: () => this.view.ownServed(), report, keepOnly };
    this.mesh =
      mesh && new MeshPeers({ ...o, ...mesh, admin: this.admin, feed: (i) => this.feed(i), served });
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.applyAll(this.node.start());
    this.health.start();
    this.unwatchCache = watchEngineCache(this.engine, (input) => this.feed(input));
    this.served.startSweeping(this.now);
  }

  // ------------------------------------------------------------------ NodeService (client API)

  /** Every model of the mesh with the nodes serving it (mesh-models.ts): ours first. */
  meshModels(): MeshModel[] {
    const self = { id: this.nodeId, base: this.modelId, models: [this.modelId, ...this.adapters] };
    return meshModels(self, peerModels(this.o.peerUrls.keys(), this.admin, this.node));
  }

  tokenize(text: string, gone?: AbortSignal) {
    return this.steps.tokenize(text, gone);
  }

  applyChatTemplate(messages: Parameters<Engine["applyChatTemplate"]>[0], gone?: AbortSignal) {
    return this.steps.applyChatTemplate(messages, gone);
  }

  admit(serves?: boolean): Admission {
    const phase = intakePhase(this.started, this.stopping, this.resetting);
    return this.intake.admit(phase, this.clients.size + this.steps.overdue, this.maxPending, serves);
  }

  submit(
    input: InferenceInput,
    events: ServeEvents,
    link: ClientLink,
    admission?: Admission,
  ): Promise<ServeOutcome> {
    // Taken in before shutdown: served while the node drains (from here on, a waiting client).
    const taken = this.intake.submitted(admission);
    if (taken === "after-drain") return Promise.reject(shutDownError());
    const stopping = this.stopping && taken !== "admitted";
    const phase = intakePhase(this.started, stopping, this.resetting);
    const state = { phase, pending: this.clients.size + this.intake.size, max: this.maxPending };
    const refused = admissionError(state, this.engine, input);
    if (refused) return Promise.reject(refused);
    const reqId = `${this.nodeId}-${this.node.currentEpoch}-${++this.seq}`;
    const request = engineRequestOf(reqId, input, events.onChunk !== undefined);
    const answer = this.clients.open(reqId, request, events, link);
    if (input.deadlineMs !== undefined) this.clients.expireAfter(reqId, input.deadlineMs);
    this.feed({ type: "client-request", reqId, request });
    return answer;
  }

  ready() {
    if (!this.started) return { ok: false, detail: "starting" };
    if (this.stopping) return { ok: false, detail: "shutting down" };
    const engine = this.health.current;
    if (!engine.ok) return { ok: false, detail: `engine: ${engine.detail ?? "unhealthy"}` };
    return { ok: true };
  }

  get isStopping(): boolean {
    return this.stopping;
  }

  clusterView() {
    return this.view.cluster(this.clients.size, this.intake.size + this.steps.overdue, this.steps.peerOpen);
  }

  // ------------------------------------------------------------------ peer server handlers

  peerHandlers(): PeerServerHandlers {
    const mesh = this.mesh;
    return { ...this.traffic.handlers(), ...(mesh ? { onMesh: (f, b) => mesh.onMesh(f, b) } : {}) };
  }

  // ------------------------------------------------------------------ admin calls

  setPolicy(name: string): void {
    this.admin.setPolicy(name);
  }

  /**
   * A crash-restart (§2) in process: cache emptied, new epoch, peers re-learn us; only when idle.
   */
  async resetCache(): Promise<void> {
    const busy = this.clients.size > 0 || this.intake.size > 0 || this.node.queueDepth() > 0;
    if (this.resetting || busy) return this.admin.dropEngineCache(true); // refused: 409
    this.resetting = true;
    await this.admin.dropEngineCache(false).finally(() => {
      this.resetting = false;
    });
    this.timers.clear();
    this.view.keepCounts(); // the node's counts start over: the metrics' counters count on
    const effects = this.node.restart(Date.now());
    this.o.logger.info({ epoch: this.node.currentEpoch }, "cache reset: new epoch"); // before the mesh's line
    this.mesh?.newEpoch(); // ahead of the new SWIM's effects: its drop of checks spares the new one's
    this.applyAll(effects);
  }

  /** Admits a peer found at run time (its hello already checked); false if refused or shutting down. */
  addPeer(
    id: string,
    url: string,
    hello: { promptText?: boolean | undefined; capacityTokens?: number | undefined },
  ): boolean {
    return !this.stopping && this.admin.addPeer(id, url, hello);
  }

  /** Told the epoch of each snapshot a peer sends of itself (static-peer-checks.ts `sawEpoch`). */
  watchPeerEpochs(fn: (from: string, epoch: number) => void): void {
    this.traffic.onPeerEpoch = fn;
  }

  /** Removes a member: its pending forwards fail over at once, then its pool is closed. */
  removePeer(id: string, why: string): void {
    const effects = this.admin.removePeer(id);
    if (effects === undefined) return;
    this.applyAll(effects);
    this.admin.closePeer(id, why);
    this.sender.forget(id);
    this.traffic.servedCounts.forget(id);
  }

  /**
   * Graceful leave: refuse new work, tell peers (goodbye) so they stop routing here, let in-flight work
   * finish within `drainMs`, then hand back what is left (retryable errors: origins fall back).
   */
  async shutdown(drainMs: number): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    const goodbyes = this.node.goodbye().map((e) => {
      if (e.type === "mesh-send") return this.mesh?.send(e.to, e.msg);
      return e.type === "send" ? this.sender.bestEffort(e.to, { type: "goodbye" }) : undefined;
    });
    await Promise.all(goodbyes);
    this.mesh?.stop();
    const deadline = this.now() + drainMs;
    const busy = () => this.clients.size > 0 || this.intake.size > 0 || this.node.queueDepth() > 0;
    while (busy() && this.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    this.intake.endDrain();
    this.runs.abortAll();
    this.served.finishAll("shutting down");
    this.steps.abortAll();
    this.clients.failAll(shutDownError);
    this.timers.clear();
    this.health.stop();
    this.unwatchCache();
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
    if (this.mesh && movesMembers(input)) this.mesh.syncMembers();
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
      case "set-timer":
        this.timers.set(e.timer, e.delayMs, this.onTimer);
        return;
      case "cancel-timer":
        this.timers.cancel(e.timer);
        return;
      case "reply":
        replyToClient(this.clients, this.o, this.nodeId, e);
        return;
      case "engine-run":
        this.runs.start(e.jobId, e.request, e.evicted);
        return;
      case "abort-run":
        this.runs.abort(e.jobId);
        return;
      case "send":
        this.traffic.send(e.to, e.msg);
        return;
      case "mesh-send":
        void this.mesh?.send(e.to, e.msg);
        return;
      case "verify-member":
        this.mesh?.verify(e.id);
    }
  }

  /** A timer expired: back to the node, but no anti-entropy once shutdown has begun [Shutting down]. */
  private readonly onTimer = (timer: NodeTimer): void => {
    if (!this.stopping || !isPollTimer(timer)) this.feed({ type: "timer", timer });
    if (isPollTimer(timer)) this.liveness.check(this.node.shownPeers());
  };

  /** Output made for `request` by node `source` (on `stream`: peer-sender.ts), to whoever waits for it. */
  private relay(request: EngineRequest, source: string, text: string, stream?: string): void {
    if (this.served.chunk(request, text)) return;
    // A client taking the answer whole gets it from the reply: nothing to relay, splice or refuse.
    const reqId = this.clients.streamingFor(request);
    if (reqId === undefined) return;
    if (!mayReachClient(this.node.servingNow(reqId), source)) return;
    this.clients.relay(reqId, source, text, stream);
    if (source !== this.nodeId) this.feed({ type: "forward-output", reqId, from: source });
  }
}
