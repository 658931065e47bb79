/**
 * The SWIM membership protocol's vocabulary (swim.ts): what one member tells another, the effects the
 * runtime carries out and the inputs it feeds back. Messages are plain data with an exact encoded size
 * (codec.ts), so a runtime can send them over any transport and the simulator can count their bytes.
 *
 * Effects: `send` (best effort, may be lost), `set-timer` (feed back `{type:"timer"}` after `delayMs`;
 * one pending timer per `swimTimerKey`), `verify-member` (check that `id` holds the cluster's credential
 * — a certificate from the cluster CA or the shared secret — and feed back `verified`), `member-up` /
 * `member-down` (the member list changed: the node adds or drops that member's estimate), `rtt` (a
 * direct probe's round trip, which routing may use as an RTT sample).
 */
export type NodeId = string;

/** What one member believes of another; (incarnation, status rank) orders the beliefs. */
export type MemberStatus = "alive" | "suspect" | "dead" | "left";

/**
 * One piggybacked membership update. `incarnation` is only ever raised by the member itself (refuting
 * a suspicion); `from` is who suspected or declared it dead (Lifeguard counts independent suspicions).
 */
export interface MemberUpdate {
  id: NodeId;
  status: MemberStatus;
  incarnation: number;
  from?: NodeId;
}

export type SwimMessage =
  /** A probe: answer `ack` with the same seq. */
  | { type: "ping"; seq: number; updates: MemberUpdate[] }
  /** Probe `target` for me: answer `ack` (it answered) or `nack` (it did not, in time). */
  | { type: "ping-req"; seq: number; target: NodeId; updates: MemberUpdate[] }
  | { type: "ack"; seq: number; updates: MemberUpdate[] }
  /** Lifeguard: the relay is alive but the target did not answer it (the prober's own link is fine). */
  | { type: "nack"; seq: number }
  /** Piggyback-only gossip (the 200 ms tick). */
  | { type: "gossip"; updates: MemberUpdate[] }
  /**
   * Push-pull: the sender's whole member list (tombstones included); `reply` asks for the receiver's.
   * A joiner sends it to its seeds; every member to a random one now and then, and to a dead one.
   */
  | { type: "sync"; members: MemberUpdate[]; reply: boolean }
  /** Leaving: the sender's own `left` update goes with it too, this is only faster. */
  | { type: "goodbye"; incarnation: number };

export type SwimMessageType = SwimMessage["type"];

export type SwimTimer =
  | { kind: "swim-probe" }
  | { kind: "swim-gossip" }
  /** The direct probe `seq` got no ack in time: go indirect. */
  | { kind: "swim-probe-timeout"; seq: number }
  /** As a relay: the target of ping-req `seq` (ours) did not answer: nack the prober. */
  | { kind: "swim-relay-timeout"; seq: number };

export function swimTimerKey(t: SwimTimer): string {
  switch (t.kind) {
    case "swim-probe":
    case "swim-gossip":
      return t.kind;
    default:
      return `${t.kind}:${t.seq}`;
  }
}

export type SwimEffect =
  | { type: "send"; to: NodeId; msg: SwimMessage }
  | { type: "set-timer"; timer: SwimTimer; delayMs: number }
  | { type: "verify-member"; id: NodeId }
  | { type: "member-up"; id: NodeId }
  | { type: "member-down"; id: NodeId; reason: "dead" | "left" }
  /** A direct probe's round trip to `id` (ms, our clock): a free RTT sample for routing. */
  | { type: "rtt"; id: NodeId; ms: number };

export type SwimInput =
  | { type: "message"; from: NodeId; msg: SwimMessage }
  | { type: "timer"; timer: SwimTimer }
  /** The runtime's answer to `verify-member`; `incarnation`: the member's own word (admissions.ts). */
  | { type: "verified"; id: NodeId; ok: boolean; reason?: string; incarnation?: number }
  /** A seed found at run time (e.g. a `--join` address resolved to its id): ask it for the members. */
  | { type: "seed"; id: NodeId };

export interface SwimStats {
  probes: number;
  indirectProbes: number;
  suspected: number;
  /** Suspicions of ourselves we refuted. */
  refuted: number;
  declaredDead: number;
  verified: number;
  refusedMembers: number;
  /** Refused ids verified again or queued to be (their backoff ran out, or news showed a higher incarnation). */
  rechecks: number;
  /** Re-checks due but dropped because the candidate queue was full (asked at the next mention). */
  rechecksDropped: number;
  /**
   * Messages over `maxEntriesPerMessage`, dropped: SWIM's own count only. (The daemon's peer port
   * refuses a mesh message that does not decode, or is over the same bound, before it reaches SWIM:
   * net/mesh-wire.ts; the server counts those and shows them added to this one, as `/cluster`'s
   * `membership.invalid` and the metric's `invalid`: server/runtime/cluster-view.ts.)
   */
  invalid: number;
  /** Messages from a sender that is not a verified member (only sync/ping answered after verification). */
  unknownSender: number;
  /**
   * Updates refused for an incarnation past what a clock allows (config `incarnationSkewMs`): forged
   * (a suspicion no one could refute), or the sender's or our clock is far off. Also claims of a
   * member's new life above what the member itself said when checked (its hello): taken down to its own.
   */
  implausibleIncarnations: number;
  /** Candidates dropped because the candidate set was full. */
  candidatesDropped: number;
  /**
   * Alive records of our id above what we may outbid (swim/self-news.ts): another live process uses
   * our id (a copied config, an old process cut off by a partition).
   */
  duplicateId: number;
}

/** Every count at zero: a new Swim's (and a baseline for readers of the counts). */
export function zeroSwimStats(): SwimStats {
  return {
    probes: 0,
    indirectProbes: 0,
    suspected: 0,
    refuted: 0,
    declaredDead: 0,
    verified: 0,
    refusedMembers: 0,
    rechecks: 0,
    rechecksDropped: 0,
    invalid: 0,
    unknownSender: 0,
    implausibleIncarnations: 0,
    candidatesDropped: 0,
    duplicateId: 0,
  };
}

/** One member as this node sees it (tests, /cluster). */
export interface SwimMemberView {
  id: NodeId;
  status: MemberStatus;
  incarnation: number;
}
