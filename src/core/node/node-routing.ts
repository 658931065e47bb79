/**
 * PrefixNode's routing reads, kept out of node.ts: the candidates a policy ranks (self, then every
 * routable peer with what each role knows of it), whether a peer may be sent a forward now, and the
 * peer offload would move a waiting request to. They only read the roles; node.ts acts on them.
 */
import type { EngineRequest } from "../engine.js";
import { keyTokens, promptMatch } from "../namespace.js";
import type { LearnedCosts } from "./cost-model.js";
import type { PeerModels } from "./models.js";
import { type OffloadRound, offloadTarget, type Waiting } from "./offload.js";
import { cacheSavedJobs, cacheSavedJobsAt, queueWeight, shorterQueue } from "./peer-load.js";
import { speedOutsideDeadband } from "./policies/cost-aware.js";
import type { Candidate } from "./policies/index.js";
import type { RecentPrefixes } from "./recent-prefixes.js";
import { buildCandidates, peerCandidate, type SelfView } from "./routing.js";
import type { NodeId } from "./types.js";
import { NodeViews } from "./views.js";

export abstract class NodeRouting extends NodeViews {
  /** What each peer serves (its hello, via the runtime): requests naming a model route by it. */
  abstract readonly peerModels: PeerModels;
  /** The prompts queued here or forwarded by us lately (`recentPrefixMs`; undefined: off). */
  protected abstract readonly recent: RecentPrefixes | undefined;

  /**
   * Self first, then every routable peer, in membership order, with what each role knows of it;
   * `recent`: with what went to each node lately counted as cached (recentPrefixMs).
   */
  protected candidates(request: EngineRequest, now: number, self: SelfView, recent = true): Candidate[] {
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
    // One walk of the request's blocks serves self and every peer.
    const lately = recent ? this.recent?.match(keyTokens(request), now) : undefined;
    if (lately) self = this.withRecent(self, request, lately);
    const all = buildCandidates(self, peers, this.antiEntropy.index, request);
    if (lately && lately.size > 0 && all.length > 1) this.addRecent(all, request, lately);
    if (!this.config.pushBackByCache) return all;
    const k = this.learnedCosts();
    const judged = (c: Candidate) =>
      !this.byCache(depth, c.id) || this.routable(c.id, now, depth, cacheSavedJobs(c, self, k));
    return all.filter((c) => c.self || judged(c));
  }

  /** What of `request` went to `id` lately (`lately`: RecentPrefixes.match's), in prompt tokens. */
  private recentMatch(request: EngineRequest, id: NodeId, lately: ReadonlyMap<NodeId, number>): number {
    const m = lately.get(id);
    return m === undefined ? 0 : promptMatch(request, m);
  }

  /** `self` with what was queued here lately counted as cached: it is, by the time this one runs. */
  private withRecent(self: SelfView, request: EngineRequest, lately: ReadonlyMap<NodeId, number>): SelfView {
    const m = this.recentMatch(request, this.config.id, lately);
    return m > self.match ? { ...self, match: m } : self;
  }

  /** A prompt we forwarded to a peer lately counts as its match: it is queued or running there. */
  private addRecent(all: Candidate[], request: EngineRequest, recent: ReadonlyMap<NodeId, number>): void {
    for (const c of all) {
      const m = c.self ? undefined : recent.get(c.id);
      if (m !== undefined) c.estimatedMatch = Math.max(c.estimatedMatch, promptMatch(request, m));
    }
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
   * request fits its limits (a plan made before it said them); `recent` as `candidates` had it.
   */
  protected routableFor(reqId: string, to: NodeId, now: number, recent = true): boolean {
    if (!this.origin.limits.fits(to, this.origin.requestOf(reqId))) return false;
    const depth = this.executor.queueDepth();
    if (!this.byCache(depth, to) || now >= this.antiEntropy.load(to).pushBackUntil)
      return this.routable(to, now);
    const r = this.origin.requestOf(reqId);
    const view = this.executor.selfView(this.config.id, r);
    const lately = recent ? this.recent?.match(keyTokens(r), now) : undefined;
    const self = lately ? this.withRecent(view, r, lately) : view;
    const k = this.learnedCosts();
    // As `candidates` judged it (else a spill's pick and this check disagree, and loop).
    const sent = lately ? cacheSavedJobs({ estimatedMatch: this.recentMatch(r, to, lately) }, self, k) : 0;
    const saved = Math.max(sent, cacheSavedJobsAt(this.antiEntropy.index, to, r, self, k));
    return this.routable(to, now, self.queueDepth, saved);
  }

  /**
   * A routable peer that may take a forward, finishing `w` sooner than here, starting within
   * `maxWaitMs`. Without recentPrefixMs: `w` itself, queued here, would count as cached here.
   */
  protected soonerPeer(w: Waiting, now: number, maxWaitMs?: number, round?: OffloadRound, k?: LearnedCosts) {
    const self = this.executor.selfView(this.config.id, w.request);
    const mayTake = (c: Candidate) => c.self || this.origin.trust.mayHold(c.id);
    const peers = this.candidates(w.request, now, self, false).filter(mayTake);
    return offloadTarget(w, peers, k ?? this.learnedCosts(), maxWaitMs, round);
  }
}
