/**
 * What the node shows of itself and its peers: the `/cluster` object, and the view the metrics
 * gauges read at scrape time (with the node's forwarding counters under Prometheus-style names).
 * Read-only: it changes nothing it reads (it keeps only the counts of epochs before a cache reset).
 */
import type { Engine } from "../../core/engine.js";
import type { PrefixNode } from "../../core/node/node.js";
import type { SwimStats } from "../../core/node/swim/types.js";
import type { NodeStats, PeerView, TrustView } from "../../core/node/types.js";
import { CLOCK_SKEW, type RefusedView } from "../../core/refusals.js";
import type { ProtocolRange } from "../../net/protocol-range.js";
import { type GaugeView, REFUSAL_REASONS, type RefusalReason, refusalReason } from "../metrics.js";
import type { PeerGaugeView } from "../metrics-peer-series.js";
import { engineCacheStatus, engineKvEventsStatus, kvEventsGauges } from "./cache-predictions.js";
import type { SeedView } from "./seed-states.js";

/** Departed peers' kept trust records `/cluster` lists at most (the last gone first). */
export const SHOWN_DEPARTED_TRUST = 100;

export interface ClusterViewOptions {
  node: PrefixNode;
  engine: Engine;
  clusterId: string;
  /** The peer protocol versions this node speaks (its hello's `minProtocol`..`protocol`). */
  protocols: ProtocolRange;
  now: () => number;
  /** The PM QoS CPU latency limit this node holds (`--cpu-latency-us`), if any. */
  cpuLatencyUs?: number | undefined;
  /** A member's URL. */
  peerUrl(id: string): string | undefined;
  /** Whether forwards to a peer carry the prompt text. */
  sendsPromptText(id: string): boolean;
  /** Requests a peer has served, as its snapshots last said (null: it never said). */
  peerServed(id: string): number | null;
  /**
   * gossip "scuttlebutt": mesh messages from authenticated senders the peer port refused before SWIM
   * saw them: `invalid` (mesh-peers.ts `refusedMessages`), shown added to SWIM's own `invalid`, and
   * `unsupported` (`unsupportedMessages`: their sender speaks a newer protocol), shown on its own.
   */
  meshRefused?(): { invalid: number; unsupported: number };
}

/**
 * The failure detector's counts as `/cluster`'s `membership` shows them: SWIM's, and `unsupported`,
 * which only the daemon's peer port counts (the core never sees a message it cannot decode).
 */
export type MembershipCounts = SwimStats & { unsupported: number };

export class ClusterView {
  private discovery: (() => unknown) | undefined;
  private seeds: (() => SeedView[]) | undefined;
  private refusedPeers: (() => RefusedView[]) | undefined;
  /** The metrics' counts of the epochs before the last cache reset (`keepCounts`). */
  private readonly earlier: Counted = noCounts();
  /** SWIM's counts of the epochs before it (a reset starts a new SWIM): its metric counts on too. */
  private readonly earlierSwim: Partial<SwimStats> = {};

  constructor(private readonly o: ClusterViewOptions) {}

  /**
   * The node is about to restart (a cache reset), its counts starting over: those the metrics' counters
   * read are kept and added to the new epoch's, so they count on (a fall reads as a counter reset).
   */
  keepCounts(): void {
    Object.assign(this.earlier, this.counted(this.o.node.stats()));
    const swim = this.o.node.meshStats();
    if (swim) Object.assign(this.earlierSwim, this.swimCounted(swim));
  }

  /** SWIM's counts the membership metric reads: this epoch's plus the earlier ones'. */
  private swimCounted(s: SwimStats): SwimStats {
    const c = { ...s };
    for (const k of Object.keys(s) as (keyof SwimStats)[]) c[k] = s[k] + (this.earlierSwim[k] ?? 0);
    return c;
  }

  /** The counts the metrics' counters read: this epoch's plus the earlier ones'. */
  private counted(s: NodeStats): Counted {
    const c = noCounts();
    for (const k of COUNTED) c[k] = s[k] + this.earlier[k];
    return c;
  }

  /** Adds what peer discovery sees (e.g. each DNS address and its status) to `/cluster`. */
  setDiscovery(fn: () => unknown): void {
    this.discovery = fn;
  }

  /** Adds what became of each `--join` seed to `/cluster` (gossip "scuttlebutt"). */
  setSeeds(fn: () => SeedView[]): void {
    this.seeds = fn;
  }

  /** Adds the static peers refused (and when each is asked again) to `/cluster` (gossip "full"). */
  setRefused(fn: () => RefusedView[]): void {
    this.refusedPeers = fn;
  }

  /**
   * The `/cluster` object, with `inFlightClients` client requests waiting for their answer and
   * `intakeClients` still being templated or tokenized (or overdue at the engine): --max-pending bounds
   * the two together; `peerTokenizing`, peers' forwards tokenized again here (--max-peer-tokenizing).
   */
  cluster(inFlightClients: number, intakeClients = 0, peerTokenizing = 0) {
    const { node, engine } = this.o;
    const now = this.o.now();
    const s = node.stats();
    const mesh = node.meshMembers();
    const swim = this.swimStats();
    return {
      id: node.id,
      cluster: this.o.clusterId,
      model: engine.info.model,
      engine: engine.info.kind,
      policy: node.policyName,
      epoch: node.currentEpoch,
      // A peer is taken if its hello's versions overlap these (protocol-range.ts).
      protocol: this.o.protocols.max,
      minProtocol: this.o.protocols.min,
      treeTokens: node.treeSize(),
      treeVersion: node.treeVersion(),
      capacityTokens: engine.info.capacityTokens,
      // Remote engines: how the server's cache is modelled, and how often its predictions held.
      engineCache: engineCacheStatus(engine) ?? null,
      // The depth peers are told (a held engine counts, as in each peer's row); `queuedJobs`: the jobs.
      queueDepth: node.reportedDepth(),
      queuedJobs: node.queueDepth(),
      pushBackActive: node.currentPushBackMs() > 0,
      // null: the machine's own setting (idle CPUs may halt).
      cpuLatencyUs: this.o.cpuLatencyUs ?? null,
      inFlightClients,
      intakeClients,
      peerTokenizing,
      served: this.ownServed(),
      stats: s,
      peers: node.shownPeers().map((p) => ({
        id: p.id,
        url: this.o.peerUrl(p.id),
        liveness: p.liveness,
        suspected: p.liveness !== "live",
        estimateTokens: p.estimateTokens,
        estimateAgeMs: memberAgeMs(p),
        // gossip "scuttlebutt": a dead or departed member SWIM still remembers (no longer a member).
        // `gone`: why, "left" (said goodbye: a planned stop) or "dead" (declared dead).
        ...(p.goneForMs !== undefined ? { goneForMs: p.goneForMs, gone: p.gone } : {}),
        held: p.held,
        holdsOfUs: p.holdsOfUs,
        queueDepth: p.queueDepth,
        pushBackActive: p.pushBackUntil > now,
        pushBackUntil: p.pushBackUntil,
        rttMs: p.rttMs,
        /** Requests it has served in its epoch, as its snapshots say: the cluster-wide share per member. */
        served: this.o.peerServed(p.id),
        /**
         * Peer trust: score in [0, 1], breaker state (closed, open, half-open), failures (`late`: those
         * for answering past the first deadline), refusals.
         */
        trust: p.trust ?? null,
        /** What it said a forward must fit (`contextTokens`, `maxTokens`: its ceiling), refusing one; null: nothing. */
        limits: p.limits ?? null,
        /** Forwards to it carry the prompt text (false once its hello said its engine needs tokens only). */
        promptText: this.o.sendsPromptText(p.id),
        /** The models its hello advertised (empty: not heard yet). */
        models: node.peerModels.of(p.id),
      })),
      // Candidates whose check refused them: why, and in how long each is asked again.
      refused: this.refused(),
      // The trust kept of peers out of the membership, what each comes back with: a staller declared
      // dead and back (or gone from DNS and back) returns as demoted as it went.
      departedTrust: this.departedTrust(),
      ...(this.discovery ? { discovery: this.discovery() } : {}),
      // The --gossip mode; "scuttlebutt": every member SWIM holds, with its status (dead ones while
      // remembered).
      gossip: mesh ? "scuttlebutt" : "full",
      ...(mesh ? { members: mesh } : {}),
      // gossip "scuttlebutt": the SWIM failure detector's own counts in this epoch (refutations,
      // refused news, …): what an operator alerts on, as prefixmesh_membership_events_total.
      ...(swim ? { membership: swim } : {}),
      // gossip "scuttlebutt": each --join seed, what its hello said, and what SWIM holds of it now.
      ...(mesh && this.seeds
        ? {
            seeds: this.seeds().map((s) => ({
              ...s,
              member: mesh.find((m) => m.id === s.memberId && s.state === "joined")?.status ?? null,
            })),
          }
        : {}),
    };
  }

  private departedTrust() {
    const d = this.o.node.departedTrust(SHOWN_DEPARTED_TRUST);
    return {
      total: d.total,
      peers: d.peers.map((p) => ({
        id: p.id,
        trust: p.trust,
        goneForMs: p.goneForMs,
        epoch: p.epoch ?? null,
      })),
    };
  }

  /** What the metrics gauges show (built once per scrape). */
  gauges(): GaugeView {
    const { node } = this.o;
    const now = this.o.now();
    const s = this.counted(node.stats());
    const swim = this.swimStats(true);
    const kv = engineKvEventsStatus(this.o.engine);
    return {
      treeTokens: node.treeSize(),
      queueDepth: node.queueDepth(),
      pushBackActive: node.currentPushBackMs() > 0,
      peers: node.shownPeers().map((p) => {
        const ageMs = memberAgeMs(p);
        return {
          peer: p.id,
          suspected: p.liveness !== "live",
          down: p.liveness === "down",
          left: p.gone === "left",
          ...(ageMs !== undefined ? { estimateAgeSec: ageMs / 1000 } : {}),
          estimateTokens: p.estimateTokens,
          pushBackActive: p.pushBackUntil > now,
          ...(p.trust ? trustGauges(p.trust) : {}),
        };
      }),
      forwardEvents: forwardEvents(s),
      clientGone: {
        hangup: {
          queued: s.clientGoneQueued - s.clientGoneDeadlineQueued,
          forwarded: s.clientGoneForwarded - s.clientGoneDeadlineForwarded,
          running: s.clientGoneRunning - s.clientGoneDeadlineRunning,
        },
        deadline: {
          queued: s.clientGoneDeadlineQueued,
          forwarded: s.clientGoneDeadlineForwarded,
          running: s.clientGoneDeadlineRunning,
        },
      },
      engineAborted: {
        "client-gone": s.abortedClientGone,
        hedged: s.abortedHedged,
        cancelled: s.abortedCancelled,
      },
      refused: refusedCounts(this.refused(), this.seeds?.() ?? []),
      ...(swim ? { membershipEvents: membershipEvents(swim) } : {}),
      ...(kv ? { kvEvents: kvEventsGauges(kv) } : {}),
    };
  }

  /**
   * SWIM's counts as shown: its `invalid` (messages over its entry bound) plus the mesh messages the
   * peer port refused first. Both are garbage from an authenticated node; one count to alert on.
   * A newer build's messages (`unsupported`) are expected in a rolling upgrade: counted apart.
   */
  private swimStats(counting = false): MembershipCounts | undefined {
    const ours = this.o.node.meshStats();
    if (!ours) return undefined;
    // The metric counts on across cache resets; `/cluster` shows this epoch's SWIM.
    const swim = counting ? this.swimCounted(ours) : ours;
    const refused = this.o.meshRefused?.() ?? { invalid: 0, unsupported: 0 };
    return { ...swim, invalid: swim.invalid + refused.invalid, unsupported: refused.unsupported };
  }

  /** Candidates refused now: SWIM's, and the full mesh's static peers. */
  private refused(): RefusedView[] {
    return [...(this.o.node.meshRefused() ?? []), ...(this.refusedPeers?.() ?? [])];
  }

  /** Requests this node has served in its current epoch (`/cluster`, and what its snapshots report). */
  ownServed(): number {
    const s = this.o.node.stats();
    return s.servedLocal + s.servedForPeers;
  }
}

/** What the metrics show of a peer's trust. */
function trustGauges(t: TrustView): Pick<PeerGaugeView, "trustScore" | "breakerOpen" | "lateAnswers"> {
  return { trustScore: t.score, breakerOpen: t.state !== "closed", lateAnswers: t.late };
}

/**
 * How old a member's estimate is, as `/cluster` and the metrics show it (ms; undefined: never heard).
 * Full mesh: since it was last heard; scuttlebutt: since its newest state arrived or its own digest
 * named the version held.
 */
function memberAgeMs(p: PeerView): number | undefined {
  return p.silentMs ?? p.estimateAgeMs;
}

/**
 * The node's counts the metrics' counters read (prefixmesh_forward_events, _client_gone_total,
 * _engine_aborted_total): the node's start over with each epoch, the counters' do not (`keepCounts`).
 */
const COUNTED = [
  "forwarded",
  "fallbacks",
  "ackTimeouts",
  "lateReplies",
  "duplicateForwards",
  "cancelledForwards",
  "overdueAnswers",
  "forwardTimeouts",
  "peerErrors",
  "expiredForwards",
  "hedgedAnswers",
  "clientGoneQueued",
  "clientGoneForwarded",
  "clientGoneRunning",
  "clientGoneDeadlineQueued",
  "clientGoneDeadlineForwarded",
  "clientGoneDeadlineRunning",
  "abortedClientGone",
  "abortedHedged",
  "abortedCancelled",
] as const satisfies readonly (keyof NodeStats)[];

type Counted = Record<(typeof COUNTED)[number], number>;

function noCounts(): Counted {
  return Object.fromEntries(COUNTED.map((k) => [k, 0])) as Counted;
}

/** The node's forwarding counters under Prometheus-style names (prefixmesh_forward_events{event}). */
function forwardEvents(s: Counted): Record<string, number> {
  return {
    forwarded: s.forwarded,
    fallback: s.fallbacks,
    ack_timeout: s.ackTimeouts,
    late_reply: s.lateReplies,
    duplicate_forward: s.duplicateForwards,
    cancelled_forward: s.cancelledForwards,
    overdue_answer: s.overdueAnswers,
    forward_timeout: s.forwardTimeouts,
    peer_error: s.peerErrors,
    expired_forward: s.expiredForwards,
    hedged_answer: s.hedgedAnswers,
  };
}

/**
 * SWIM's counts under the event names of prefixmesh_membership_events_total. A Record over every
 * MembershipCounts key, so a count added to the core fails to compile here until it is named.
 */
const MEMBERSHIP_EVENTS: Record<keyof MembershipCounts, string> = {
  probes: "probe",
  indirectProbes: "indirect_probe",
  suspected: "suspected",
  refuted: "refuted",
  declaredDead: "declared_dead",
  verified: "verified",
  refusedMembers: "refused",
  rechecks: "recheck",
  rechecksDropped: "recheck_dropped",
  invalid: "invalid",
  unsupported: "unsupported",
  unknownSender: "unknown_sender",
  implausibleIncarnations: "implausible_incarnation",
  candidatesDropped: "candidate_dropped",
  duplicateId: "duplicate_id",
};

function membershipEvents(s: MembershipCounts): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, event] of Object.entries(MEMBERSHIP_EVENTS)) out[event] = s[key as keyof MembershipCounts];
  return out;
}

/**
 * Refusals counted by reason, every reason present (a series that drops to 0 stays 0, not gone). A
 * seed refusing us for clock skew counts too: a joiner whose clock is off hears of no member at all,
 * so its seeds are the only place the cause shows.
 */
function refusedCounts(
  refused: readonly RefusedView[],
  seeds: readonly SeedView[],
): Record<RefusalReason, number> {
  const n = Object.fromEntries(REFUSAL_REASONS.map((r) => [r, 0])) as Record<RefusalReason, number>;
  for (const r of refused) n[refusalReason(r.reason)]++;
  for (const s of seeds) if (s.state === "refused" && s.reason === CLOCK_SKEW) n[CLOCK_SKEW]++;
  return n;
}
