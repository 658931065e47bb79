/**
 * PrefixNode's routing reads, kept out of node.ts: the candidates a policy ranks (self, then every
 * routable peer with what each role knows of it), whether a peer may be sent a forward now, and the
 * peer offload would move a waiting request to. They only read the roles; node.ts acts on them.
 */
import type { EngineRequest } from "../engine.js";
import type { LearnedCosts } from "./cost-model.js";
import type { PeerModels } from "./models.js";
import { type OffloadRound, offloadTarget, type Waiting } from "./offload.js";
import { cacheSavedJobs, cacheSavedJobsAt, queueWeight, shorterQueue } from "./peer-load.js";
import { speedOutsideDeadband } from "./policies/cost-aware.js";
import type { Candidate } from "./policies/index.js";
import { buildCandidates, peerCandidate, type SelfView } from "./routing.js";
import type { NodeId } from "./types.js";
import { NodeViews } from "./views.js";

export abstract class NodeRouting extends NodeViews {
  /** What each peer serves (its hello, via the runtime): requests naming a model route by it. */
  abstract readonly peerModels: PeerModels;

  /** Self first, then every routable peer, in membership order, with what each role knows of it. */
  protected candidates(request: EngineRequest, now: number, self: SelfView): Candidate[] {
    const peers: Candidate[] = [];
    const depth = self.queueDepth;
    for (const id of this.members.ids()) {
      // pushBackByCache: a pushing-back peer is judged once its match is known (below).
      const later = this.byCache(depth, id) ? Number.POSITIVE_INFINITY : 0;
      if (!this.routable(id, now, depth, later) || !this.peerModels.serves(id, request.model)) continue;
      // A peer that said the request exceeds its limits (peer-limits.ts) would only refuse it.
      if (!this.origin.limits.fits(id, request)) continue;
      const unreported = this.origin.unreportedTo(id, now);
      peers.push(peerCandidate(id, this.antiEntropy.load(id), unreported, this.origin.targets, now));
    }
    const all = buildCandidates(self, peers, this.antiEntropy.index, request);
    if (!this.config.pushBackByCache) return all;
    const k = this.learnedCosts();
    const judged = (c: Candidate) =>
      !this.byCache(depth, c.id) || this.routable(c.id, now, depth, cacheSavedJobs(c, self, k));
    return all.filter((c) => c.self || judged(c));
  }

  /**
   * Live, trusted, not pushing back — unless our queue is deeper than its own (local is worse
   * still), counting what its cache saves the request (`savedJobs`, pushBackByCache) on our side.
   */
  protected routable(
    id: NodeId,
    now: number,
    selfDepth = this.executor.queueDepth(),
    savedJobs = 0,
  ): boolean {
    if (this.members.liveness(id, now) !== "live" || !this.antiEntropy.routes(id)) return false;
    if (!this.origin.trust.routable(id, now)) return false;
    const load = this.antiEntropy.load(id);
    return now >= load.pushBackUntil || shorterQueue(load, selfDepth, this.executor.engineCosts(), savedJobs);
  }

  /**
   * pushBackByCache counts a peer's cache only while our own queue is past the push-back threshold
   * too (in the peer's jobs, as push-back compares queues): every node busy (a cold start), where
   * computing a prefix again costs the most (a node 10× slower is that busy with one job). With room
   * here, the busy peer keeps its relief — its queue may be stuck behind a long run its depth hides.
   */
  private byCache(selfDepth: number, peer: NodeId): boolean {
    if (!this.config.pushBackByCache) return false;
    const w = queueWeight(this.antiEntropy.load(peer).costs, this.executor.engineCosts());
    return selfDepth > this.config.pushBackQueueThreshold * speedOutsideDeadband(w);
  }

  /**
   * `routable` for a planned peer of a pending request of ours (its cache's saving counted), if the
   * request fits its limits (a plan made before it said them).
   */
  protected routableFor(reqId: string, to: NodeId, now: number): boolean {
    if (!this.origin.limits.fits(to, this.origin.requestOf(reqId))) return false;
    const depth = this.executor.queueDepth();
    if (!this.byCache(depth, to) || now >= this.antiEntropy.load(to).pushBackUntil)
      return this.routable(to, now);
    const r = this.origin.requestOf(reqId);
    const self = this.executor.selfView(this.config.id, r);
    const saved = cacheSavedJobsAt(this.antiEntropy.index, to, r, self, this.learnedCosts());
    return this.routable(to, now, self.queueDepth, saved);
  }

  /** A routable peer that may take a forward, finishing `w` sooner than here, starting within `maxWaitMs`. */
  protected soonerPeer(w: Waiting, now: number, maxWaitMs?: number, round?: OffloadRound, k?: LearnedCosts) {
    const self = this.executor.selfView(this.config.id, w.request);
    const mayTake = (c: Candidate) => c.self || this.origin.trust.mayHold(c.id);
    const peers = this.candidates(w.request, now, self).filter(mayTake);
    return offloadTarget(w, peers, k ?? this.learnedCosts(), maxWaitMs, round);
  }
}
