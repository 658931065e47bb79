/**
 * Prometheus metrics for one node (its own Registry, so several nodes can live in one process in tests).
 * Counters are bumped by the API and the runtime; gauges about the cluster view are read lazily from a
 * provider at scrape time, so nothing is computed when nobody scrapes. The process's own metrics
 * (`process_*`, `nodejs_*`: CPU, memory, event-loop lag, GC) are prom-client's defaults.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import { CLOCK_SKEW } from "../core/refusals.js";
import { CounterPeers, DEFAULT_METRIC_PEERS } from "./metric-peers.js";
import { type KvEventsGaugeView, kvEventMetrics } from "./metrics-kv-events.js";
import { type PeerGaugeView, peerLivenessGauges, perPeerGauges } from "./metrics-peer-series.js";
import { type CertNotAfter, tlsExpiryMetrics } from "./metrics-tls.js";

export type { KvEventsGaugeView } from "./metrics-kv-events.js";
export type { PeerGaugeView } from "./metrics-peer-series.js";

export interface GaugeView {
  treeTokens: number;
  queueDepth: number;
  pushBackActive: boolean;
  peers: PeerGaugeView[];
  /** The node's own cumulative counts of forwarding events (fallbacks, ack timeouts, …), by name. */
  forwardEvents?: Record<string, number>;
  /** The node's own cumulative counts of client requests whose client hung up, by stage. */
  /** By reason (hangup, deadline), then stage. */
  clientGone?: Record<string, Record<string, number>>;
  /** The node's own cumulative counts of engine runs aborted (nobody took the answer), by reason. */
  engineAborted?: Record<string, number>;
  /** Candidate members refused now (asked again after a backoff), by the check's reason. */
  refused?: Record<RefusalReason, number>;
  /** gossip "scuttlebutt": the SWIM failure detector's cumulative counts, by event; absent on the full mesh. */
  membershipEvents?: Record<string, number>;
  /** A remote engine following KV events (vLLM, SGLang): its stream's and mirror's standing. */
  kvEvents?: KvEventsGaugeView;
}

/** The reasons a hello or credential check refuses a candidate for; anything else counts as `other`. */
export const REFUSAL_REASONS = [
  "wrong-cluster",
  "wrong-model",
  "wrong-protocol",
  "wrong-gossip",
  "wrong-id",
  "malformed",
  "no-credential",
  /** Shared-secret mode: a peer refused our signed timestamp; a clock is off, not the credential. */
  CLOCK_SKEW,
  "other",
] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/** The reason code a refusal's text starts with (`wrong-cluster: …`), or `other`. */
export function refusalReason(text: string): RefusalReason {
  const code = text.split(":", 1)[0] ?? "";
  return (REFUSAL_REASONS as readonly string[]).includes(code) ? (code as RefusalReason) : "other";
}

export type NodeMetrics = ReturnType<typeof createMetrics>;

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export interface MetricsOptions {
  /** The process and Node.js metrics (default true; tests that build many registries may skip them). */
  processMetrics?: boolean;
  /** Peers with per-peer series of their own (metric-peers.ts; default DEFAULT_METRIC_PEERS). */
  maxPeerSeries?: number;
  /** The engine follows KV events: its stream's and mirror's series exist (absent otherwise). */
  kvEvents?: boolean;
  /** --tls-dir: the loaded certificates' ends, reported as the time left (absent otherwise). */
  tlsNotAfter?: CertNotAfter;
}

export function createMetrics(nodeId: string, opts: MetricsOptions = {}) {
  const registry = new Registry();
  registry.setDefaultLabels({ node: nodeId });
  if (opts.processMetrics !== false) collectDefaultMetrics({ register: registry });
  let provider: (() => GaugeView) | undefined;
  let scraped: GaugeView | undefined;
  /**
   * The cluster view for this scrape: prom-client runs every gauge's `collect` in one synchronous
   * pass, so the view is built once per scrape and dropped in the next microtask.
   */
  const view = (): GaugeView | undefined => {
    if (!provider) return undefined;
    if (!scraped) {
      scraped = provider();
      queueMicrotask(() => {
        scraped = undefined;
      });
    }
    return scraped;
  };
  const registers = [registry];
  const maxPeerSeries = opts.maxPeerSeries ?? DEFAULT_METRIC_PEERS;
  const counterPeers = new CounterPeers(maxPeerSeries);
  /** A counter whose `label` names a peer: past the bound, its increments count under `other`. */
  const byPeer = <L extends string, K extends L>(c: Counter<L>, label: K) => ({
    inc(labels: Partial<Record<L, string>>, n?: number): void {
      const id = labels[label];
      const mapped = id === undefined ? labels : { ...labels, [label]: counterPeers.label(id) };
      c.inc(mapped as Partial<Record<L, string | number>>, n);
    },
  });

  const counter = <L extends string = never>(name: string, help: string, labelNames: readonly L[] = []) =>
    new Counter<L>({ name, help, labelNames, registers });
  const requests = counter(
    "prefixmesh_requests_total",
    "Client requests by outcome (ok, overloaded = answered 429, gone = the client hung up, error) and " +
      "route (local = served here, forwarded = served by a peer, none = not served)",
    ["outcome", "route"],
  );
  const latency = new Histogram({
    name: "prefixmesh_request_duration_seconds",
    help: "End-to-end client request latency at the entry node",
    labelNames: ["route"] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const phases = new Histogram({
    name: "prefixmesh_request_phase_seconds",
    help:
      "Where a served client request's time went, at the entry node: queue, prefill and decode at the " +
      "serving engine; network = the rest (routing, peer round trips, failed attempts)",
    labelNames: ["phase"] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  });
  const servedBy = byPeer(
    counter(
      "prefixmesh_requests_served_by_total",
      "Client requests that entered here and were answered, by the node that served them (member ids " +
        "only; past --metrics-max-peers, `other`)",
      ["served_by"],
    ),
    "served_by",
  );
  const served = counter(
    "prefixmesh_served_total",
    "Requests this node's engine ran, by origin (self or a peer)",
    ["origin"],
  );
  const promptTokens = counter(
    "prefixmesh_prompt_tokens_total",
    "Prompt tokens of requests that entered here",
  );
  const predictedCached = counter(
    "prefixmesh_predicted_cached_tokens_total",
    "Cached tokens the routing decision predicted (estimated match at decision time)",
  );
  const actualCached = counter(
    "prefixmesh_actual_cached_tokens_total",
    "Cached tokens the serving engine actually reused",
  );
  const enginePredictions = counter(
    "prefixmesh_engine_cache_predictions_total",
    "Remote engine runs by how the cache model's predicted cached tokens compared with the server's report " +
      "(outcome: exact, wrong, unpredicted, unreported; source: llama-slots, kv-events, lru)",
    ["outcome", "source"],
  );
  const gossipBytes = byPeer(
    counter(
      "prefixmesh_gossip_bytes_total",
      "Gossip bytes by peer and direction: anti-entropy snapshots and mesh (SWIM, Scuttlebutt) messages " +
        "(peers past --metrics-max-peers as `other`)",
      ["peer", "direction"],
    ),
    "peer",
  );
  const peerFailures = byPeer(
    counter(
      "prefixmesh_peer_send_failures_total",
      "Peer messages that failed at the transport (refused, reset, timeout; peers past " +
        "--metrics-max-peers as `other`)",
      ["peer", "reason"],
    ),
    "peer",
  );
  const authRejected = counter(
    "prefixmesh_peer_auth_rejected_total",
    "Peer requests refused by authentication (they never reach a tree or an engine), and forward " +
      "channels this node refused because their 101 answer was not the peer's (reason channel-accept)",
    ["reason"],
  );
  const connectionsRefused = counter(
    "prefixmesh_connections_refused_total",
    "Connections the server refused or cut short, by port and reason: limit (the port's total open), " +
      "per-address (the client address's share open), idle (sent nothing), timeout (headers or request late)",
    ["port", "reason"],
  );
  const forwardsRefused = counter(
    "prefixmesh_forwards_refused_total",
    "Peers' forwards this node refused before its engine saw them, by reason: context (prompt + max_tokens " +
      "past the engine's context), ceiling (max_tokens past --max-tokens-ceiling), tokenize (another " +
      "model's prompt it could not tokenize), tokenize-busy (--max-peer-tokenizing forwards already being " +
      "tokenized), cancelled (its origin cancelled it while, or before, it was tokenized here), stopping " +
      "(shutting down); each but a cancelled one is retried elsewhere",
    ["reason"],
  );
  const pushBack = counter(
    "prefixmesh_pushback_advertised_total",
    "Snapshots sent while advertising push-back",
  );

  const g = (name: string, help: string, labelNames: string[], collect: (this: Gauge) => void) =>
    new Gauge({ name, help, labelNames, registers, collect });
  g("prefixmesh_tree_tokens", "Tokens in this node's own radix tree", [], function () {
    const v = view();
    if (v) this.set(v.treeTokens);
  });
  g("prefixmesh_queue_depth", "Requests queued or running at this node's engine", [], function () {
    const v = view();
    if (v) this.set(v.queueDepth);
  });
  let connectedPeers: (() => number) | undefined;
  g(
    "prefixmesh_peer_connected_peers",
    "Peers this node holds connections to (pools, forward channels): at most --max-connected-peers, " +
      "plus those past it kept while a forward is open on their channel",
    [],
    function () {
      if (connectedPeers) this.set(connectedPeers());
    },
  );
  g("prefixmesh_pushback_active", "1 while this node advertises push-back", [], function () {
    const v = view();
    if (v) this.set(v.pushBackActive ? 1 : 0);
  });
  g(
    "prefixmesh_refused_members",
    "Candidate members this node refuses now, by the check's reason (another cluster, model, protocol " +
      "or --gossip mode, no credential, clock-skew: a clock off by more than the shared-secret window, " +
      "which also counts --join seeds that refuse us for it, …); each is asked again after a backoff " +
      "(/cluster `refused`, `seeds`)",
    ["reason"],
    function () {
      const v = view();
      if (!v?.refused) return;
      for (const [reason, count] of Object.entries(v.refused)) this.set({ reason }, count);
    },
  );
  g(
    "prefixmesh_members",
    "Members this node knows, by state: live, suspected (silent, or not heard from yet), down",
    ["state"],
    function () {
      const v = view();
      if (!v) return;
      const n = { live: 0, suspected: 0, down: 0 };
      for (const p of v.peers) n[p.down ? "down" : p.suspected ? "suspected" : "live"]++;
      for (const [state, count] of Object.entries(n)) this.set({ state }, count);
    },
  );
  const perPeer = perPeerGauges(registers, () => view()?.peers, maxPeerSeries);
  peerLivenessGauges(perPeer);
  perPeer(
    "prefixmesh_peer_estimate_age_seconds",
    "Time since this node last had evidence that its estimate of a peer is the peer's current state " +
      "(docs/operations.md, What the estimate age means)",
    (p) => p.estimateAgeSec,
  );
  perPeer(
    "prefixmesh_peer_estimate_tokens",
    "Tokens in the estimate held for a peer",
    (p) => p.estimateTokens,
  );
  /** A counter read at scrape time from one flat record of the node's cumulative counts. */
  const countsOf = (
    name: string,
    help: string,
    label: string,
    read: (v: GaugeView) => Record<string, number> | undefined,
  ) =>
    new Counter({
      name,
      help,
      labelNames: [label],
      registers,
      collect() {
        const v = view();
        if (!v) return;
        this.reset();
        for (const [value, n] of Object.entries(read(v) ?? {})) this.inc({ [label]: value }, n);
      },
    });
  // The name predates the `_total` convention and is kept so existing queries still work.
  countsOf(
    "prefixmesh_forward_events",
    "Forwarding events since start (a cache reset included), as the node counts them (fallback, " +
      "ack_timeout, late_reply, …)",
    "event",
    (v) => v.forwardEvents,
  );
  new Counter({
    name: "prefixmesh_client_gone_total",
    help:
      "Client requests given up before the reply, by why (reason): hangup (the client hung up) or " +
      "deadline (its x-prefixmesh-deadline-ms passed: answered 504); and by where the request was " +
      "(stage): queued (dropped from this node's queue), forwarded (its peer was sent a cancel), " +
      "running (on this node's engine: aborted where it can, see prefixmesh_engine_aborted_total, " +
      "else run to its end, unreplied)",
    labelNames: ["stage", "reason"],
    registers,
    collect() {
      const v = view();
      if (!v) return;
      this.reset();
      for (const [reason, stages] of Object.entries(v.clientGone ?? {}))
        for (const [stage, n] of Object.entries(stages)) this.inc({ stage, reason }, n);
    },
  });
  countsOf(
    "prefixmesh_engine_aborted_total",
    "Engine runs aborted because nobody would take their answer, by reason: client-gone (our client " +
      "hung up while it ran here), hedged (a peer answered it first), cancelled (a forward's origin " +
      "no longer takes its answer). Only engines that can abort without the cache going astray do",
    "reason",
    (v) => v.engineAborted,
  );
  countsOf(
    "prefixmesh_membership_events_total",
    "The SWIM failure detector's own events since the node started (cache resets included), by " +
      "event; --gossip scuttlebutt only (absent under --gossip full): probe (direct probes sent), " +
      "indirect_probe (relays asked to probe for us), suspected (members we marked suspect), refuted " +
      "(suspicions of this node it outbid while alive: poor local health or a lossy network), " +
      "declared_dead, verified " +
      "(candidates admitted), refused (candidates whose check failed), recheck, recheck_dropped, " +
      "invalid (mesh messages from an authenticated node that did not decode or were over the entry " +
      "bound: the peer port's 400s plus SWIM's own drops), unsupported (mesh messages refused because " +
      "their sender's hello names a newer protocol and they are of a kind this build does not know: " +
      "expected during a rolling upgrade), unknown_sender (messages from a non-member), " +
      "implausible_incarnation (news past what a clock allows, or past what the member's own hello " +
      "said when checked: forged, a clock far off, or two processes with that member's id), " +
      "candidate_dropped (the candidate set was full), duplicate_id (records of this node's id from " +
      "another live process: two processes run with one id)",
    "event",
    (v) => v.membershipEvents,
  );
  if (opts.kvEvents) kvEventMetrics(registers, () => view()?.kvEvents);
  if (opts.tlsNotAfter) tlsExpiryMetrics(registers, opts.tlsNotAfter);
  perPeer("prefixmesh_peer_pushback", "1 while a peer's push-back is in force", (p) =>
    p.pushBackActive ? 1 : 0,
  );
  perPeer(
    "prefixmesh_peer_trust_score",
    "A peer's trust score (answers in time, smoothed)",
    (p) => p.trustScore,
  );
  perPeer("prefixmesh_peer_breaker_open", "1 while a peer's circuit breaker is open or half-open", (p) =>
    p.breakerOpen === undefined ? undefined : p.breakerOpen ? 1 : 0,
  );
  // A gauge, not a counter: the count is the trust record's, which starts over when it is forgotten
  // (beyond trust.ts MAX_DEPARTED) or our cache resets, and the peers shown change between scrapes.
  perPeer(
    "prefixmesh_peer_late_answers",
    "Of a peer's trust failures, those for slowness: forwards it answered past the first deadline " +
      "this node gave it (kept open only by output it streamed), or that ended then by its client " +
      "hanging up, its refusal for load or its goodbye (/cluster peers[].trust.late; the count its " +
      "trust record holds, which starts over with our cache reset or a record forgotten)",
    (p) => p.lateAnswers,
  );

  return {
    registry,
    requests,
    latency,
    phases,
    servedBy,
    served,
    promptTokens,
    predictedCached,
    actualCached,
    enginePredictions,
    gossipBytes,
    peerFailures,
    authRejected,
    connectionsRefused,
    forwardsRefused,
    pushBack,
    setViewProvider(fn: () => GaugeView): void {
      provider = fn;
    },
    /** What the peer client says of its connected peers (PeerClient.connectedPeers). */
    setConnectedPeers(fn: () => number): void {
      connectedPeers = fn;
    },
  };
}
