/**
 * Builds the policy's view of the cluster for one request from local state only: one `matchAll`
 * walk over the merged peer estimates answers every peer's estimated match at once.
 */
import type { Tokens } from "../engine.js";
import type { PeerIndex } from "../peer-index.js";
import type { Membership } from "./membership.js";
import type { Candidate } from "./policies/policy.js";
import type { NodeId } from "./types.js";

export interface SelfView {
  id: NodeId;
  match: number;
  queueDepth: number;
  capacityTokens: number;
}

const scratch = new Map<string, number>();

/** Self first, then every routable peer (live, not pushing back at us), in membership order. */
export function buildCandidates(
  members: Membership,
  index: PeerIndex,
  tokens: Tokens,
  now: number,
  self: SelfView,
): Candidate[] {
  const out: Candidate[] = [
    {
      id: self.id,
      self: true,
      estimatedMatch: self.match,
      estimateAgeMs: 0,
      queueDepth: self.queueDepth,
      rttMs: 0,
      capacityTokens: self.capacityTokens,
    },
  ];
  for (const p of members.all()) {
    if (!members.routable(p, now, self.queueDepth)) continue;
    out.push({
      id: p.id,
      self: false,
      estimatedMatch: 0, // filled in below, by one walk for all peers
      estimateAgeMs: p.estimateAt === undefined ? Number.POSITIVE_INFINITY : now - p.estimateAt,
      queueDepth: p.queueDepth,
      queueAgeMs: p.queueAt === undefined ? undefined : now - p.queueAt,
      sentSinceQueue: p.sentSinceQueue,
      rttMs: p.rttMs,
      capacityTokens: p.capacityTokens,
    });
  }
  if (out.length === 1) return out; // nobody to forward to: no index walk
  const { owners, lengths } = index.matchAll(tokens);
  scratch.clear();
  for (let i = 0; i < owners.length; i++) scratch.set(owners[i] as string, lengths[i] as number);
  for (let i = 1; i < out.length; i++) {
    const c = out[i] as Candidate;
    c.estimatedMatch = scratch.get(c.id) ?? 0;
  }
  return out;
}
