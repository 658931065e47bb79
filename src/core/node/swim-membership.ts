/**
 * Membership for `gossip: "scuttlebutt"`: the SWIM machine (swim/swim.ts) behind the surface node.ts
 * uses of `Membership`. Members are who SWIM holds alive or suspect (suspect = "suspected": not
 * routed to); nobody is added by config — `peers` are only the seeds. What node.ts must do when a
 * member comes or goes (its estimate, its pending forwards) comes back as `up` / `down`.
 */
import { invariant } from "../invariant.js";
import type { RoundPeer } from "./anti-entropy.js";
import type { NodeConfig } from "./config.js";
import { Swim } from "./swim/swim.js";
import type { SwimEffect, SwimInput } from "./swim/types.js";
import type { Effect, Liveness, NodeDeps, NodeId, NodeInput, PeerView } from "./types.js";

/** What one SWIM step asks of the node: effects to carry out, members that came and went. */
export interface MeshEvents {
  effects: Effect[];
  up: NodeId[];
  down: NodeId[];
  /** Those of `down` that left (a goodbye, theirs or relayed): they drain what they took. */
  left: NodeId[];
  /** Round trips of direct probes: RTT samples (the full mesh's snapshot echo has no twin here). */
  rtt: { id: NodeId; ms: number }[];
}

export class SwimMembership {
  readonly swim: Swim;

  /** The last `roundPeers` and SWIM's members version it was built at. */
  private rounds: { version: number; peers: readonly RoundPeer[] } | undefined;
  /** Each member's RoundPeer as last built (reused while its liveness stands: a rebuild allocates little). */
  private readonly peerOf = new Map<NodeId, RoundPeer>();

  constructor(config: NodeConfig, deps: NodeDeps) {
    this.swim = new Swim(config.id, config.peers, deps, config.swim);
  }

  start(): MeshEvents {
    return translate(this.swim.start());
  }

  /** Leave: our goodbye to every member (and our `left` update rides on anything still sent). */
  leave(): Effect[] {
    return translate(this.swim.leave()).effects;
  }

  /** A SWIM input of the node's (a mesh message on the swim channel, a verification, a swim timer). */
  handle(input: NodeInput): MeshEvents {
    let i: SwimInput | undefined;
    if (input.type === "mesh-message" && input.msg.channel === "swim")
      i = { type: "message", from: input.from, msg: input.msg.msg };
    else if (input.type === "member-verified")
      i = {
        type: "verified",
        id: input.id,
        ok: input.ok,
        ...(input.reason !== undefined ? { reason: input.reason } : {}),
        ...(input.incarnation !== undefined ? { incarnation: input.incarnation } : {}),
      };
    else if (input.type === "mesh-seed") i = { type: "seed", id: input.id };
    else if (input.type === "timer" && input.timer.kind === "swim")
      i = { type: "timer", timer: input.timer.timer };
    return i === undefined
      ? { effects: [], up: [], down: [], left: [], rtt: [] }
      : translate(this.swim.handle(i));
  }

  // The Membership surface node.ts reads. Run-time adds and removes are SWIM's, not the runtime's.
  add(_id: NodeId, _now: number): boolean {
    return false;
  }
  remove(_id: NodeId): boolean {
    return false;
  }
  get size(): number {
    return this.swim.liveMembers().length;
  }
  /**
   * Every member as a gossip round sees it, rebuilt only when SWIM's members change: a rebuild per
   * round (a pass over all members) grew as N per node per round. No RTT: the scuttlebutt round,
   * the only one fed by SWIM, reads none. Frozen, so its identity stands for its content.
   */
  roundPeers(): readonly RoundPeer[] {
    const version = this.swim.membersVersion;
    if (this.rounds?.version === version) return this.rounds.peers;
    const ids = this.ids();
    // Members gone for good leave their entries behind: dropped once they outnumber the members.
    if (this.peerOf.size > 2 * ids.length + 64) this.peerOf.clear();
    const peers: RoundPeer[] = new Array(ids.length);
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] as NodeId;
      const live = this.swim.status(id) === "alive";
      let p = this.peerOf.get(id);
      if (p === undefined || p.live !== live) {
        p = Object.freeze({ id, live, rttMs: undefined });
        this.peerOf.set(id, p);
      }
      peers[i] = p;
    }
    this.rounds = { version, peers: Object.freeze(peers) };
    return this.rounds.peers;
  }
  has(id: NodeId): boolean {
    const s = this.swim.status(id);
    return id !== this.swim.selfId && (s === "alive" || s === "suspect");
  }
  ids(): readonly NodeId[] {
    return this.swim.liveMembers();
  }
  heard(_id: NodeId, _now: number): void {}
  sendFailed(_id: NodeId): void {}
  departed(_id: NodeId): void {}
  liveness(id: NodeId, _now: number): Liveness {
    const s = this.swim.status(id);
    return s === "alive" ? "live" : s === "suspect" ? "suspected" : "down";
  }
  view(id: NodeId, now: number): Pick<PeerView, "liveness" | "silentMs"> {
    return { liveness: this.liveness(id, now), silentMs: undefined };
  }
}

function translate(effects: SwimEffect[]): MeshEvents {
  const ev: MeshEvents = { effects: [], up: [], down: [], left: [], rtt: [] };
  for (const e of effects) {
    switch (e.type) {
      case "send":
        ev.effects.push({ type: "mesh-send", to: e.to, msg: { channel: "swim", msg: e.msg } });
        break;
      case "set-timer":
        ev.effects.push({ type: "set-timer", timer: { kind: "swim", timer: e.timer }, delayMs: e.delayMs });
        break;
      case "verify-member":
        ev.effects.push({ type: "verify-member", id: e.id });
        break;
      case "member-up":
        invariant(!ev.down.includes(e.id), () => `swim step took ${e.id} down and up`);
        ev.up.push(e.id);
        break;
      case "member-down":
        invariant(!ev.up.includes(e.id), () => `swim step took ${e.id} up and down`);
        ev.down.push(e.id);
        if (e.reason === "left") ev.left.push(e.id);
        break;
      case "rtt":
        ev.rtt.push({ id: e.id, ms: e.ms });
        break;
    }
  }
  return ev;
}
