/**
 * PrefixNode's life outside its inputs: `start`, crash-recovery (§2: the cache gone, a strictly larger
 * epoch), the graceful leave, and what the runtime sets or learns (calibration, the policy, a peer
 * found, a peer's hello). Kept out of node.ts, which is left the input dispatch and the decisions on
 * requests: none of these routes a request or fails one over. Removing a peer fails its forwards
 * over, so `removePeer` stays in node.ts.
 */
import { nodeId } from "./config.js";
import type { CostSample } from "./engine-costs.js";
import * as mesh from "./mesh.js";
import { NodeRouting } from "./node-routing.js";
import type { PolicyConfigInput, PolicyName } from "./policies/index.js";
import type { Effect, NodeId, NodeInput } from "./types.js";

export abstract class NodeLifecycle extends NodeRouting {
  protected epoch = 0;
  /** Said goodbye: draining, so no more anti-entropy (a snapshot would tell peers we are back). */
  protected leaving = false;

  /** The gossip mesh's step (node.ts): `start` runs it first. */
  protected abstract onMesh(input: NodeInput | "start", now: number, out: Effect[]): void;

  protected reset(epoch: number): void {
    this.epoch = epoch;
    // A restart keeps the full mesh's current membership (peers added or removed at run time included).
    const { members, ids } = mesh.newMembership(this.config, this.deps, this.members);
    this.members = members;
    this.executor.reset();
    this.antiEntropy.reset(epoch, ids, this.maxPeers() + 1);
    this.origin.reset(ids);
    this.recent?.clear();
    this.serving.reset(epoch);
    this.unknownSender = 0;
    this.leaving = false;
  }

  /** Arms the anti-entropy timer. Call once before feeding inputs. */
  start(): Effect[] {
    const out: Effect[] = [{ type: "set-timer", timer: { kind: "poll" }, delayMs: this.pollDelay() }];
    this.onMesh("start", this.deps.now(), out);
    return out;
  }

  /**
   * Crash-recovery (§2): the cache is gone, a new epoch starts, peers will replace our estimate.
   * Pending client requests are lost with a crash (the daemon's reset runs idle and refuses clients).
   */
  restart(epoch?: number): Effect[] {
    const cancels = this.origin.dropAll(); // peers running their forwards: final cancels
    // Epochs are whole, strictly increasing numbers (they go on the wire).
    this.reset(Math.max(Math.floor(epoch ?? this.deps.now()), this.epoch + 1));
    return [...cancels, ...this.start()];
  }

  /** Stop (graceful leave): tell every peer so they stop routing here at once. */
  goodbye(): Effect[] {
    this.leaving = true;
    return mesh.goodbyes(this.members);
  }

  /** Start-up calibration runs (engine-costs.ts), taken as our own before the node is ready. */
  calibrate(samples: readonly CostSample[]): void {
    this.executor.calibrate(samples);
  }

  /** Switch routing policy at run time (e.g. the daemon's compare-policies admin endpoint). */
  setPolicy(name: PolicyName, config?: PolicyConfigInput<PolicyName>): void {
    this.origin.setPolicy(name, config);
  }

  /**
   * Adds a peer at run time (e.g. found by DNS and verified by the runtime): unknown until it speaks,
   * it gets our full state at the next tick. False for our own id, an invalid id, a current member,
   * or a full membership.
   */
  addPeer(id: NodeId): boolean {
    if (id === this.config.id || !nodeId.safeParse(id).success) return false;
    if (this.members.has(id) || this.members.size >= this.maxPeers()) return false;
    this.members.add(id, this.deps.now());
    this.origin.addPeer(id);
    this.antiEntropy.add(id);
    return true;
  }

  /** The cache `peer` advertised (its hello): our estimate of it never holds more. */
  capPeerEstimate(peer: NodeId, capacityTokens: number): void {
    // Gossip: a hello may come before SWIM lists its sender (a member joining or coming back).
    if (this.members.has(peer) || this.config.gossip !== "full")
      this.antiEntropy.capPeer(peer, capacityTokens);
  }

  /** The next poll's delay: Δpoll × (1 ± jitter). */
  protected pollDelay(): number {
    return this.config.pollMs * (1 + this.config.pollJitter * (2 * this.deps.random() - 1));
  }
}
