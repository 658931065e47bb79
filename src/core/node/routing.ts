/**
 * The policy's view of the cluster for one request, from local state only: one `matchAll` walk over
 * the merged peer estimates answers every peer's estimated match at once; and the plan a policy's
 * order makes (the peers it ranks before self).
 */
import type { EngineRequest } from "../engine.js";
import { keyTokens, promptMatch } from "../namespace.js";
import type { PeerIndex } from "../peer-index.js";
import type { PeerLoad } from "./peer-sync.js";
import type { Candidate } from "./policies/policy.js";
import type { Targets } from "./targets.js";
import type { NodeId } from "./types.js";

export interface SelfView {
  id: NodeId;
  match: number;
  queueDepth: number;
  capacityTokens: number;
  treeTokens: number;
  /** With `offload`: the expected wait here, elapsed-aware (see `Candidate.waitMs`). */
  waitMs?: number;
}

const scratch = new Map<string, number>();

/** A routable peer as the policy sees it: what it advertised, and what we measured of it (`measured`). */
export function peerCandidate(
  id: NodeId,
  load: Readonly<PeerLoad>,
  sentSinceQueue: number,
  measured: Pick<Targets, "rttMs" | "observed">,
  now: number,
): Candidate {
  const observed = measured.observed(id);
  return {
    id,
    self: false,
    estimatedMatch: 0, // filled in by `buildCandidates`, one walk for all peers
    estimateAgeMs: load.estimateAt === undefined ? Number.POSITIVE_INFINITY : now - load.estimateAt,
    queueDepth: load.queueDepth,
    queueAgeMs: load.queueAt === undefined ? undefined : now - load.queueAt,
    sentSinceQueue,
    rttMs: measured.rttMs(id),
    capacityTokens: load.capacityTokens,
    ...(load.treeTokens === undefined ? {} : { treeTokens: load.treeTokens }),
    ...(observed === undefined ? {} : { observedPrefill: observed }),
    ...(load.costs === undefined ? {} : { advertisedCosts: load.costs }),
  };
}

/**
 * Self first, then `peers` (the routable ones, as node.ts assembled them, `estimatedMatch` still 0)
 * with their estimated matches filled in. Reuses `peers` for the result.
 */
export function buildCandidates(
  self: SelfView,
  peers: Candidate[],
  index: PeerIndex,
  request: EngineRequest,
): Candidate[] {
  peers.unshift({
    id: self.id,
    self: true,
    estimatedMatch: self.match,
    estimateAgeMs: 0,
    queueDepth: self.queueDepth,
    rttMs: 0,
    capacityTokens: self.capacityTokens,
    treeTokens: self.treeTokens,
    ...(self.waitMs === undefined ? {} : { waitMs: self.waitMs }),
  });
  if (peers.length === 1) return peers; // nobody to forward to: no index walk
  // Estimates hold cache keys: a namespace's prefixes match only requests of that namespace.
  const { owners, lengths } = index.matchAll(keyTokens(request));
  scratch.clear();
  for (let i = 0; i < owners.length; i++)
    scratch.set(owners[i] as string, promptMatch(request, lengths[i] as number));
  for (let i = 1; i < peers.length; i++) {
    const c = peers[i] as Candidate;
    c.estimatedMatch = scratch.get(c.id) ?? 0;
  }
  return peers;
}

/**
 * Appends to `plan` the peers `order` ranks before self: what follows self never matters — unless
 * `pastSelf` (self may not run the request): then every peer, in the policy's order.
 */
export function planFromOrder(
  order: readonly number[],
  candidates: readonly Candidate[],
  plan: NodeId[],
  pastSelf = false,
): NodeId[] {
  for (const i of order) {
    const c = candidates[i];
    if (c?.self && pastSelf) continue;
    if (!c || c.self) break;
    plan.push(c.id);
  }
  return plan;
}
