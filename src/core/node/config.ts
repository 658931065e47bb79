/**
 * Node configuration with the paper's defaults. Validated with zod because it comes from flags,
 * YAML or a simulator config: a bad value is a clear error, never a misbehaving node.
 */
import { z } from "zod";
import { ALL_POLICY_NAMES, policyConfigSchema } from "./policies/index.js";
import { swimConfigSchema } from "./swim/config.js";

/** A node id as the config accepts it (also checked when a peer is added at run time). */
export const nodeId = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9._-]+$/, "node ids use letters, digits, '.', '_' and '-'");

export const nodeConfigSchema = z
  .object({
    id: nodeId,
    /** Static membership: every other node's id. Messages from anyone else are ignored and counted. */
    peers: z.array(nodeId).max(1024).default([]),
    /**
     * Most peers at once: the static ones plus those added at run time (`addPeer`, e.g. found by DNS).
     * Default: the static list's size, i.e. a fixed membership. Bounds the merged estimate index.
     */
    maxPeers: z.number().int().min(0).max(4095).optional(),
    /**
     * How the mesh keeps membership and estimates. "full": the paper's full mesh — every Δpoll a
     * snapshot (or heartbeat) to every peer, liveness by silence. "scuttlebutt": SWIM membership with
     * Lifeguard (join through `peers` as seeds; members learned by gossip, verified by the runtime)
     * and Scuttlebutt digest anti-entropy with `gossipFanout` members per Δpoll, relaying any owner.
     */
    gossip: z.enum(["full", "scuttlebutt"]).default("full"),
    /** gossip "scuttlebutt": members each anti-entropy round talks to. */
    gossipFanout: z.number().int().min(1).max(64).default(3),
    /**
     * gossip "scuttlebutt": anti-entropy rounds per Δpoll, evenly spaced. A change takes about two
     * rounds to reach every node, so two rounds per Δpoll keep estimates about as fresh as the full
     * mesh's one snapshot per Δpoll, which routing needs while caches fill.
     */
    gossipRoundsPerPoll: z.number().int().min(1).max(8).default(2),
    /** gossip "scuttlebutt": estimates of at most this many members (default: maxPeers). */
    maxEstimates: z.number().int().min(1).max(4095).optional(),
    /** gossip "scuttlebutt": SWIM settings (swim/config.ts; memberlist's defaults). */
    swim: swimConfigSchema.partial().optional(),
    policy: z.enum(ALL_POLICY_NAMES).default("affinity"),
    /** Settings of `policy` (its own schema, in its file; omitted ones take its defaults). */
    policyConfig: z.record(z.string(), z.unknown()).optional(),
    /** KV capacity in tokens: the tree's capacity. */
    capacityTokens: z.number().int().positive(),
    cacheMode: z.enum(["node-managed", "engine-managed"]).default("node-managed"),
    /**
     * The engine can abort a run (EngineInfo.abortable): a running job whose answer nobody takes any
     * more (its client hung up, a hedge's peer answered first, its origin's final cancel) is aborted.
     */
    abortRuns: z.boolean().default(false),
    /** Δpoll: anti-entropy period. */
    pollMs: z.number().positive().max(3_600_000).default(500),
    /** Each tick is scheduled at pollMs × (1 ± pollJitter) so peers do not broadcast in lockstep. */
    pollJitter: z.number().min(0).max(0.9).default(0.1),
    /** k: a peer silent for k × Δpoll is suspected. */
    suspectAfterPolls: z.number().positive().max(1000).default(3),
    /**
     * A peer silent for this many Δpoll is down, not just suspected: a crashed node (no goodbye)
     * then reads as gone, and its stale estimate as stale. Routing treats both alike (never to a
     * peer that is not live). Unset: only a goodbye marks a peer down.
     */
    downAfterPolls: z.number().positive().max(100_000).optional(),
    /** Give up on a forward attempt after this long (then next candidate, finally local). */
    forwardTimeoutMs: z.number().positive().max(3_600_000).default(30_000),
    /**
     * Floor of the wait for a forward's `forward-ack`: the attempt is abandoned (like a forward
     * timeout) after max(this, 4 × the peer's smoothed RTT — its RTT prior until measured), capped at
     * forwardTimeoutMs. 4 × SRTT is TCP's RTO with a generous variance term; the floor covers the
     * receiver's own processing and scheduling lag on a fast LAN. Raise it where uploading the largest
     * prompt takes longer than that (the ack leaves after the whole forward has arrived). A value ≥
     * forwardTimeoutMs turns the ack wait off (only the forward timeout applies, as before acks).
     */
    forwardAckTimeoutMs: z.number().positive().max(3_600_000).default(250),
    /**
     * Re-sends of an unacked forward before the attempt is abandoned (a probe each; the receiver
     * never runs a re-sent forward twice, it acks again). Trades latency for compute: falling back
     * at once runs the request a second time whenever only the ack was lost, while each re-send
     * waits 4 × RTT, which long links pay for no gain (BENCHMARKS.md, "Forward acks under message
     * loss"). Default 0: latency first.
     */
    forwardResends: z.number().int().min(0).max(8).default(0),
    /**
     * Whether origins may probe this node for a lost answer: its acks carry an ETA and it keeps its
     * recent answers to send again. Over a lossy network (the simulator) that is how a lost answer is
     * recovered without running the request twice. The daemon's peers talk over streams that fail
     * loudly and never probe, so it turns this off: no second tree match per forward for the ETA, and
     * no finished answers kept alive.
     */
    answerProbes: z.boolean().default(true),
    /**
     * Answer recovery (beyond the paper; forward-acks.ts), for answers lost without a broken stream
     * (a frozen or black-holed path; the simulator's silent loss): this node keeps its recent answers
     * to forwards to send again, and as an origin, once an acked forward's answer is later than our
     * own estimate of it (the plan's, or offload's; an ETA when the ack carries one) by a margin, asks
     * for it by re-sending the forward — the peer sends the kept answer again, or acks again while
     * the job still waits or runs. A lost answer then costs that margin, not the answer deadline
     * or the forward timeout. Needs no ETA in acks (unlike `answerProbes`).
     */
    answerRecovery: z.boolean().default(false),
    /**
     * Forward attempts of one request that may end in a timeout (never acked, a probe unanswered,
     * the peer silent, a failed send; an overdue answer is the peer's failure and does not count)
     * before it stops trying peers: it then runs here. With it set, a request that lost any attempt to
     * a timeout runs here ahead of every job that arrived after it (it has waited already; by arrival,
     * so a burst of them never starves what queued before; with maxWaitMs, at the tail, so the jobs
     * admitted keep their bound) and is never offloaded again: with nothing older queued (and no
     * bound), chained losses cost at most this many ack timeouts and one local run. With answerRecovery, an
     * unanswered probe counts one and is re-sent while the cap allows. 0 = no cap: every planned peer, then
     * the queue's tail.
     */
    maxTimedOutAttempts: z.number().int().min(0).max(64).default(0),
    /**
     * As a forward's receiver, hold each `forward-ack` this long and drop it if the forward's answer
     * (result or error) leaves first: a quick answer then costs no extra message. 0 = ack at once.
     * One timer serves every waiting ack, armed only while some wait. Keep it far below the origins'
     * ack timeout (forwardAckTimeoutMs), which the deferral eats into.
     */
    ackDeferMs: z.number().min(0).max(60_000).default(0),
    /**
     * Fresh peer load (beyond the paper; peer-load.ts): acks and answers to forwards carry the
     * server's queue depth, and an origin adds to a peer's last reported depth the forwards it has
     * in flight to it (sent, not yet acked or answered) instead of those sent since the report.
     * Off: queue depth rides on snapshot headers only (a Δpoll old), as in the paper.
     */
    freshPeerLoad: z.boolean().default(false),
    /**
     * A full snapshot replacing more keys than this is applied in steps of this many keys, one step
     * per `estimates` timer, so a snapshot at the key cap never holds the node for long; until it is
     * all in, that peer's estimate matches nothing. 0 = every snapshot applies at once (the paper).
     */
    estimateStepKeys: z
      .number()
      .int()
      .min(0)
      .max(1 << 24)
      .default(0),
    /**
     * This node's engine runs from the prompt text, not from the tokens alone: a forward without the
     * text is refused at once (retryable, PROMPT_TEXT_NEEDED) and not recorded as seen, so the
     * origin's re-send with the text is not taken for a duplicate.
     */
    needsPromptText: z.boolean().default(false),
    /**
     * Forwards arriving with more hops than this are refused. This node never re-forwards (a
     * forwarded request is served by its receiver), so chains cannot form whatever the value.
     */
    maxHops: z.number().int().min(1).max(8).default(1),
    /**
     * The models this node serves (its engine's model and adapters): a request naming another model
     * is never run here, only routed to a peer serving it. Empty (default): serves whatever it is
     * asked, as before models were known (the simulator, single-model meshes).
     */
    models: z.array(z.string().min(1).max(256)).max(64).default([]),
    /** Requests run at once (1 = the paper's batching-free setting). */
    concurrency: z.number().int().min(1).max(1024).default(1),
    /** Push-back (§3.2): advertise "pause" while queue depth (waiting + running) exceeds this. */
    pushBackQueueThreshold: z.number().int().min(1).max(1_000_000).default(8),
    /** How long peers should pause routing to us; 0 = estimate from the queue and service time. */
    pushBackMs: z.number().min(0).max(3_600_000).default(0),
    /**
     * Push-back's exception ("our queue is deeper: local is worse still") weighs each request while
     * our own queue is past pushBackQueueThreshold too: the prefill a pushing-back peer's cache saves
     * it counts on our side (peer-load.ts). Off: queue depths alone, as in the paper; then under load
     * everywhere (a cold start) every request whose prefix only busy peers hold computes it again here.
     */
    pushBackByCache: z.boolean().default(false),
    /**
     * For this long after a prompt is queued here or forwarded by us, routing counts it as cached
     * there (recent-prefixes.ts; a later one of the same prefix renews the time): a prefix queued or
     * running shows in a node's tree and estimate only after its run. Local to the node, nothing on
     * the wire. 0: off, as in the paper.
     */
    recentPrefixMs: z.number().min(0).max(600_000).default(0),
    /** Hard bound on queued requests (a peer- and client-controlled size): beyond it, reject. */
    maxQueue: z.number().int().min(1).max(1_000_000).default(1024),
    /** Longest prompt accepted (client or peer), in tokens. */
    maxPromptTokens: z.number().int().min(1).max(16_777_216).default(1_048_576),
    /** A peer's push-back is honoured for at most this long (a peer-controlled number). */
    maxPushBackMs: z.number().min(0).max(3_600_000).default(60_000),
    /** Forward ids remembered to drop duplicated forwards (bounded). */
    dedupWindow: z.number().int().min(0).max(1_000_000).default(4096),
    /**
     * Priors of the learned costs (cost-aware routing), used until the node's own engine results
     * outweigh them. Conservative on purpose, so a cold node leans to serving locally: a cheap
     * prefill (0.5 ms/token) and a slow network (250 ms RTT) until measured. The RTT prior is replaced
     * by the first echo of an anti-entropy round (one poll), the prefill prior fades after a few runs.
     * Gossip "scuttlebutt" measures only the members it talks to: there an unmeasured member is
     * priced at the median RTT measured to the others once there is one (views.ts).
     */
    costPrior: z
      .object({
        prefillFixedMs: z.number().min(0).max(600_000).default(50),
        prefillMsPerToken: z.number().min(0).max(60_000).default(0.5),
        weight: z.number().min(0.001).max(1_000_000).default(2),
        rttMs: z.number().min(0).max(600_000).default(250),
      })
      .prefault({}),
    /**
     * Prior of the prefix demand an origin learns (demand.ts): `weight` pseudo-prefixes reused
     * `meanReuse` times each. Leans to serving locally (buying a prefix) until real counts exist.
     */
    demandPrior: z
      .object({
        meanReuse: z.number().min(0).max(1_000_000).default(8),
        weight: z.number().min(0).max(1_000_000).default(16),
      })
      .prefault({}),
    /**
     * Peer trust (trust.ts): score each peer from its answers to our forwards and stop routing to
     * one whose breaker opened (a stalling, failing or refusing peer). Off: the paper's crash-only
     * model, where only silence (suspicion) keeps a peer from being chosen.
     */
    peerTrust: z.boolean().default(false),
    /** Failures within trustWindowMs that open a peer's breaker. */
    trustFailures: z.number().int().min(1).max(1000).default(3),
    trustWindowMs: z.number().positive().max(3_600_000).default(60_000),
    /** A breaker stays open this long before one forward probes; doubles per failed probe. */
    trustOpenMs: z.number().positive().max(3_600_000).default(10_000),
    trustMaxOpenMs: z.number().positive().max(3_600_000).default(120_000),
    /**
     * With peerTrust: a peer on probation (no answer to our forwards yet, since our start or since
     * its breaker last opened) is sent at most this many forwards it has not answered, open or
     * failed (trust.ts); more go elsewhere until it answers one. 0 = no bound (the paper's model).
     */
    trustMaxUnanswered: z.number().int().min(0).max(1000).default(0),
    /**
     * With peerTrust: an acked forward not answered by answerSlack × its expected time (the ack's
     * ETA, else our own estimate from the peer's queue and our learned costs) + answerSlackMs fails
     * over at once (and counts against the peer) instead of waiting for forwardTimeoutMs.
     */
    answerSlack: z.number().min(1).max(1000).default(3),
    answerSlackMs: z.number().min(0).max(3_600_000).default(1_000),
    /**
     * Admission by expected wait: a client request that would wait here longer than this (ms, from
     * its admission; the executor prices each queued job's run from the cost model) first goes to a
     * peer expected to start it within it, else is refused at once as overloaded, with when to retry
     * (the time our queue needs to drain back under the bound). The bound holds for every request
     * queued: forwards carry what is left of it (`waitMs`) and are refused past it, or past our own
     * bound; offload moves a request only where it should start within what is left. 0 = off: only
     * maxQueue refuses.
     */
    maxWaitMs: z.number().min(0).max(3_600_000).default(0),
    /**
     * Spot checks (spot-check.ts): this fraction of peers' answers to deterministic requests
     * (temperature 0) is recomputed here when idle; a peer whose answer disagrees is quarantined.
     * 0 = off.
     */
    spotCheckRate: z.number().min(0).max(1).default(0),
    /**
     * Offload: our own wait is judged by how long the running jobs have run, not by the queue's count
     * alone (a job far past the usual service time, e.g. an unbounded generation, is expected to run
     * as long again), so routing sends new work to a peer that will finish it sooner; and at each
     * anti-entropy tick our clients' requests still waiting here move to such a peer (each move
     * charged to that peer's wait at once, offload.ts). Cost-aware's "a peer's wait never counts
     * shorter than ours" is then bounded (`OFFLOAD_WAIT_FLOOR_JOBS`).
     */
    offload: z.boolean().default(false),
    /**
     * Advertise our engine's measured costs (fixed, per uncached, cached and output token;
     * engine-costs.ts) in every snapshot header, and compare peers by theirs: cost-aware scales a
     * peer's prefill and queue wait by its advertised speed against ours. Off: headers as in the paper.
     */
    advertiseCosts: z.boolean().default(false),
    /** Per-sample decay of the prefill fit: memory ≈ 1 / (1 − decay) engine runs. */
    costDecay: z.number().min(0.5).max(1).default(0.98),
  })
  .refine((c) => !c.peers.includes(c.id), { message: "peers must not include the node itself" })
  .refine((c) => new Set(c.peers).size === c.peers.length, { message: "peers must be unique" })
  .refine((c) => c.downAfterPolls === undefined || c.downAfterPolls > c.suspectAfterPolls, {
    message: "downAfterPolls must exceed suspectAfterPolls (a silent peer is suspected first)",
  })
  .refine((c) => c.maxPeers === undefined || c.maxPeers >= c.peers.length, {
    message: "maxPeers must be at least the number of static peers",
  })
  .superRefine((c, ctx) => {
    if (c.policyConfig === undefined) return;
    const r = policyConfigSchema(c.policy).safeParse(c.policyConfig);
    for (const i of r.error?.issues ?? [])
      ctx.addIssue({ code: "custom", path: ["policyConfig", ...i.path], message: i.message });
  });

export type NodeConfig = z.output<typeof nodeConfigSchema>;
export type NodeConfigInput = z.input<typeof nodeConfigSchema>;

/**
 * The node configuration the daemon (`prefixmesh node`) runs with, stated once: its settings default
 * to these (src/server/settings.ts, default-policy.ts), its node is built from them
 * (src/server/runtime/daemon-node-config.ts), and the simulator runs them with `daemonConfig`. A test
 * holds the node the daemon assembles from default settings to every key here, so they cannot drift.
 * The schema's own defaults above stay the paper's and the simulator's: they differ where the daemon's
 * peers, talking over reliable streams, need something else.
 */
export const DAEMON_NODE_DEFAULTS = {
  /** Forwards only where the prefill saved outweighs the hop (default-policy.ts says why). */
  policy: "cost-aware",
  /** The transport's own ack carries no ETA, and a broken stream fails at once: nobody probes. */
  answerProbes: false,
  /**
   * Over TCP nothing is lost silently, so the ack only guards against a frozen or black-holed peer;
   * a busy machine must not turn slow acks into spurious fallbacks (duplicate work).
   */
  forwardAckTimeoutMs: 1_000,
  forwardTimeoutMs: 30_000,
  concurrency: 1,
  /**
   * The ack rides the forward's own answer stream: held back a moment and dropped when the answer
   * leaves first, a quick answer costs no extra record.
   */
  ackDeferMs: 10,
  /**
   * A frozen peer or a black-holed path loses an answer without breaking its stream: the origin
   * asks for it again soon after our estimate of it, rather than at the answer deadline.
   */
  answerRecovery: true,
  /** Chained losses cost at most two ack timeouts before the request runs here, ahead of later arrivals. */
  maxTimedOutAttempts: 2,
  /**
   * A snapshot at the key cap (2^21 keys) is applied in steps: the event loop stays responsive. A
   * step is a few milliseconds on a busy machine; the runtime runs steps back to back in time slices.
   */
  estimateStepKeys: 4_096,
  /** A peer that acks and never answers, fails or keeps refusing is routed around (trust.ts). */
  peerTrust: true,
  /** A peer that never answered us holds at most 3 of our forwards (trust.ts: probation). */
  trustMaxUnanswered: 3,
  /** A crashed peer reads as down after 20 silent polls (10 s at the default Δpoll). */
  downAfterPolls: 20,
  /** Peers know each other's speed (calibrated at start-up, engine-costs.ts): heterogeneous machines. */
  advertiseCosts: true,
  offload: true,
  /** A peer pushing back still gets the requests its cache saves more than its extra queue costs. */
  pushBackByCache: true,
  /**
   * A second request for a prefix still queued or running (here, or at the peer we forwarded the
   * first to) goes after it, not cold to another node: fewer prefixes computed twice in a cold start.
   */
  recentPrefixMs: 10_000,
  /**
   * The mesh protocol: SWIM membership + Scuttlebutt anti-entropy, so a node joins through any member
   * and gossip grows with change, not with N. The paper's full mesh stays selectable (`--gossip full`)
   * and is what the core schema and the paper experiment run. Everything that follows the daemon's
   * mode (its --gossip setting, the simulator's `daemonConfig`) reads it here.
   */
  gossip: "scuttlebutt",
} as const satisfies Partial<NodeConfigInput>;

/** Validates and fills defaults; throws an Error with every problem listed. */
export function resolveNodeConfig(input: NodeConfigInput): NodeConfig {
  const r = nodeConfigSchema.safeParse(input);
  if (!r.success) {
    const msg = r.error.issues.map((i) => `${i.path.join(".") || "config"}: ${i.message}`).join("; ");
    throw new Error(`invalid node config: ${msg}`);
  }
  return r.data;
}
