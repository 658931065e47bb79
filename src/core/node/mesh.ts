/**
 * The `gossip` mode's choice, kept out of node.ts: which membership and anti-entropy a node runs
 * ("full": the static list and snapshots to every peer; "scuttlebutt": SWIM and digest gossip), and
 * how one step of the scuttlebutt mesh moves them together.
 */
import type { EngineRequest } from "../engine.js";
import { AntiEntropy, type OwnTree } from "./anti-entropy.js";
import type { NodeConfig } from "./config.js";
import { GossipAntiEntropy, type Restart } from "./gossip-anti-entropy.js";
import { Membership } from "./membership.js";
import { type MeshEvents, SwimMembership } from "./swim-membership.js";
import type { Targets } from "./targets.js";
import type { Effect, NodeDeps, NodeId, NodeInput } from "./types.js";

/**
 * The origin's per-peer state (targets.ts, trust.ts): a member that came gets it, one that went loses
 * it — bar its trust, kept for its return, a restart included (trust.ts `restarted`).
 */
export interface PeerState {
  readonly targets: Targets;
  addPeer(id: NodeId): void;
  /** `left`: by its own word (SWIM's leave), not declared dead: origin.ts `departed` drops its trust. */
  removePeer(id: NodeId, now: number, left?: boolean): void;
  /**
   * A member seen in a newer epoch (a restart), by whichever path: back in a newer epoch than it left
   * in, or newer than the one it is a member in. The one rule for its kept trust (trust.ts `restarted`).
   */
  restartedPeer(id: NodeId): void;
}

/** The membership of either mode (SWIM's wears Membership's surface). */
export type Members = Membership | SwimMembership;
/** The anti-entropy of either mode. */
export type Gossip = AntiEntropy | GossipAntiEntropy;

/** The anti-entropy of the configured `gossip` mode: snapshots to every peer, or scuttlebutt digests. */
export function newAntiEntropy(config: NodeConfig, deps: NodeDeps): Gossip {
  return config.gossip === "full"
    ? new AntiEntropy(config, config.id, deps.peerIndex)
    : new GossipAntiEntropy(config, config.id, deps);
}

/**
 * The membership of a (re)start. The full mesh keeps the current members (peers added or removed at
 * run time included); SWIM learns them anew (`peers` are only its seeds), so it starts with none.
 */
export function newMembership(
  config: NodeConfig,
  deps: NodeDeps,
  current: Members | undefined,
): { members: Members; ids: NodeId[] } {
  if (config.gossip !== "full") return { members: new SwimMembership(config, deps), ids: [] };
  const ids = current === undefined ? [...config.peers] : [...current.ids()];
  return { members: new Membership(ids, config, deps.now()), ids };
}

/** Our goodbye to every member: SWIM's leave, or a `goodbye` message each on the full mesh. */
export function goodbyes(members: Members): Effect[] {
  if (members instanceof SwimMembership) return members.leave();
  return members.ids().map((to) => ({ type: "send", to, msg: { type: "goodbye" } }) as Effect);
}

/**
 * A mesh step's events: SWIM's, and (`restarted`) members a gossip message showed back in a newer
 * epoch — a restart SWIM never saw, the member having come back within its suspicion time.
 */
export interface StepEvents extends MeshEvents {
  restarted?: readonly Restart[];
}

/** No events (most gossip messages): one frozen value, not five arrays per message. */
const NONE: MeshEvents = Object.freeze({
  effects: Object.freeze([]) as unknown as Effect[],
  up: Object.freeze([]) as unknown as NodeId[],
  down: Object.freeze([]) as unknown as NodeId[],
  left: Object.freeze([]) as unknown as NodeId[],
  rtt: Object.freeze([]) as unknown as MeshEvents["rtt"],
});

/**
 * One step of the `gossip: "scuttlebutt"` mesh for node.ts: a gossip message goes to the anti-entropy,
 * anything else of the mesh (`start`, a swim message or timer, a verification) to SWIM, whose members
 * that came or went are added to or dropped from the anti-entropy and the origin's peer state (its
 * targets and their trust: a member's breaker works as a static peer's, and outlives a refuted
 * death) here; a member that came is greeted with a digest at once, so the two hold each other's
 * estimate within a round trip.
 * node.ts fails over the forwards of members that went (`down`) or came back in a new epoch
 * (`restarted`), then samples the probes' `rtt`.
 */
export function step(
  input: NodeInput | "start",
  members: Members,
  antiEntropy: Gossip,
  peers: PeerState,
  own: { tree: OwnTree; reportedDepth(now: number): number; pushBackMs(): number },
  now: number,
  out: Effect[],
): StepEvents {
  if (!(members instanceof SwimMembership) || !(antiEntropy instanceof GossipAntiEntropy)) return NONE;
  if (input !== "start" && input.type === "mesh-message" && input.msg.channel === "gossip") {
    antiEntropy.onGossip(
      input.from,
      input.msg.msg,
      now,
      own.tree,
      own.reportedDepth(now),
      own.pushBackMs(),
      out,
    );
    // A state's header reports its owner's queue: forwards counted since the last report start over.
    for (const id of antiEntropy.drainReported()) peers.targets.loadReported(id);
    for (const id of antiEntropy.drainRenewed()) peers.restartedPeer(id);
    const restarted = antiEntropy.drainRestarted();
    for (const r of restarted) peers.restartedPeer(r.id);
    return restarted.length === 0 ? NONE : { ...NONE, restarted };
  }
  if (input !== "start" && input.type === "timer" && input.timer.kind === "gossip-round") {
    const live = members.ids().filter((id) => members.liveness(id, now) === "live");
    antiEntropy.extraRound(now, own.tree, own.reportedDepth(now), own.pushBackMs(), live, out);
    return NONE;
  }
  const ev = input === "start" ? members.start() : members.handle(input);
  out.push(...ev.effects);
  // Ups before downs loses no order: a SWIM step changes a member once at most (only a check brings
  // one up; a message only takes members down): swim-membership.ts asserts it, swim-step-order.test.ts
  // walks it.
  for (const id of ev.up) {
    antiEntropy.add(id);
    peers.addPeer(id);
    const pending = members.swim.pendingMembers();
    antiEntropy.greet(id, pending, now, own.tree, own.reportedDepth(now), own.pushBackMs(), out);
  }
  for (const id of ev.down) {
    antiEntropy.remove(id);
    peers.removePeer(id, now, ev.left.includes(id));
  }
  return ev;
}

/** Content discovery for a client request (scuttlebutt under `maxEstimates`; GossipAntiEntropy.seek). */
export function seek(
  antiEntropy: Gossip,
  request: EngineRequest,
  selfMatch: number,
  own: { reportedDepth(now: number): number; pushBackMs(): number },
  now: number,
  out: Effect[],
): void {
  if (antiEntropy instanceof GossipAntiEntropy)
    antiEntropy.seek(request, selfMatch, now, own.reportedDepth(now), own.pushBackMs(), out);
}
