/**
 * Round-based simulation of Scuttlebutt anti-entropy alone (src/core/node/gossip): N owners, each
 * with a real RadixTree, each round every node starts one push-pull with `fanout` random members, and
 * all three legs (digest → states + wants → states) are delivered within the round, optionally lost.
 * It measures what the protocol costs and how fast a change spreads, in rounds, apart from timing:
 * `runSimulation` carries the timed, full-node picture.
 */
import { type GossipMessage, type OwnState, Scuttlebutt } from "../core/node/gossip/scuttlebutt.js";
import { gossipSize } from "../core/node/gossip/size.js";
import { PeerIndex } from "../core/peer-index.js";
import { Prng } from "../core/prng.js";
import { RadixTree } from "../core/radix-tree.js";
import { addGossipParts, type MeshParts } from "./mesh-parts.js";

export interface GossipRoundsConfig {
  nodes: number;
  seed: number;
  fanout?: number;
  maxEstimates?: number;
  /** Probability each message is lost. */
  lossProb?: number;
  /** Digests of a round one partner after another (the default, as nodes run it). */
  chain?: boolean;
  /** Owners push their changes to their holders (default: when `maxEstimates` is set, as nodes run it). */
  pushToHolders?: boolean;
}

export interface GossipNode {
  id: string;
  tree: RadixTree;
  own: OwnState;
  gossip: Scuttlebutt;
}

export class GossipRounds {
  readonly nodes: GossipNode[];
  readonly rng: Prng;
  messages = 0;
  bytes = 0;
  /** Set to count where the bytes go (mesh-parts.ts), redundancy included. */
  parts: MeshParts | undefined;
  private readonly ids: string[];

  constructor(private readonly c: GossipRoundsConfig) {
    this.rng = new Prng(c.seed);
    this.ids = Array.from({ length: c.nodes }, (_, i) => `n${i}`);
    this.nodes = this.ids.map((id) => {
      const tree = new RadixTree({ capacity: Number.POSITIVE_INFINITY });
      const own: OwnState = {
        header: () => ({
          sender: id,
          epoch: 1,
          version: tree.version,
          tokenCount: tree.size,
          capacity: 0,
          queueDepth: 0,
          pushBackMs: 0,
        }),
        blocks: () => tree.blockCount,
        changesSince: (v) => tree.changesSince(v),
        snapshotBody: () => tree.snapshotBody(),
      };
      const r = this.rng.fork();
      const gossip = new Scuttlebutt(
        id,
        new PeerIndex({ maxOwners: Math.max(1, c.nodes) }),
        { random: () => r.next() },
        {
          fanout: c.fanout ?? 3,
          deltaLog: 16,
          maxEstimates: c.maxEstimates ?? Number.POSITIVE_INFINITY,
          maxStates: 4096,
          maxDigest: 8192,
          discoveryOdds: 8,
          discoveryMs: 0,
          chain: c.chain ?? true,
          pendingMs: 0,
          pushToHolders: c.pushToHolders ?? c.maxEstimates !== undefined,
        },
      );
      return { id, tree, own, gossip };
    });
  }

  /** Owner `i` caches one more random prompt of `blocks` blocks (a change of its tree). */
  change(i: number, blocks = 4): void {
    const tokens = new Uint32Array(16 * blocks);
    for (let t = 0; t < tokens.length; t++) tokens[t] = this.rng.nextUint32() % 32_000;
    (this.nodes[i] as GossipNode).tree.insert(tokens, 0);
  }

  private send(from: number, to: number, msg: GossipMessage): GossipMessage | undefined {
    this.messages++;
    this.bytes += gossipSize(msg);
    const n = this.nodes[to] as GossipNode;
    if (this.parts)
      addGossipParts(this.parts, msg, this.ids[from] as string, (o) => n.gossip.estimates.held(o));
    if (this.c.lossProb && this.rng.chance(this.c.lossProb)) return undefined;
    return n.gossip.onMessage(this.ids[from] as string, msg, n.own);
  }

  /** One round: every node pushes-pulls with `fanout` random others. */
  round(): void {
    for (let i = 0; i < this.nodes.length; i++) {
      const n = this.nodes[i] as GossipNode;
      const others = this.ids.filter((x) => x !== n.id);
      const queue = n.gossip.round(others, n.own);
      for (let m = queue.shift(); m !== undefined; m = queue.shift()) {
        const j = Number(m.to.slice(1));
        const answer = this.send(i, j, m.msg);
        if (answer === undefined) continue;
        const back = this.send(j, i, answer);
        if (back !== undefined) this.send(i, j, back);
        const next = n.gossip.continueRound(m.to, n.own);
        if (next !== undefined) queue.push(next);
      }
    }
  }

  /** Other nodes holding an estimate of owner `i`, and those of them at its current version. */
  holding(i: number): { held: number; current: number } {
    const owner = this.nodes[i] as GossipNode;
    const v = owner.tree.version;
    let held = 0;
    let current = 0;
    for (const n of this.nodes) {
      if (n === owner || !n.gossip.holds(owner.id)) continue;
      held++;
      const h = n.gossip.estimates.held(owner.id);
      if (h !== undefined && h.epoch === 1 && h.version === v) current++;
    }
    return { held, current };
  }

  /** Nodes holding owner `i`'s current (epoch, version) (the owner itself included). */
  holders(i: number): number {
    const owner = this.nodes[i] as GossipNode;
    const v = owner.tree.version;
    let k = 1;
    for (const n of this.nodes) {
      if (n === owner) continue;
      const h = n.gossip.estimates.held(owner.id);
      if (h !== undefined && h.epoch === 1 && h.version === v) k++;
    }
    return k;
  }
}
