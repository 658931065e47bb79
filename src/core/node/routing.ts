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
  const peers = members.all();
  let any = false;
  for (const p of peers) {
    if (members.routable(p, now, self.queueDepth)) {
      any = true;
      break;
    }
  }
  if (!any) return out;
  const { owners, lengths } = index.matchAll(tokens);
  scratch.clear();
  for (let i = 0; i < owners.length; i++) scratch.set(owners[i] as string, lengths[i] as number);
  for (const p of peers) {
    if (!members.routable(p, now, self.queueDepth)) continue;
    out.push({
      id: p.id,
      self: false,
      estimatedMatch: scratch.get(p.id) ?? 0,
      estimateAgeMs: p.estimateAt === undefined ? Number.POSITIVE_INFINITY : now - p.estimateAt,
      queueDepth: p.queueDepth,
      queueAgeMs: p.queueAt === undefined ? undefined : now - p.queueAt,
      sentSinceQueue: p.sentSinceQueue,
      rttMs: p.rttMs,
      capacityTokens: p.capacityTokens,
    });
  }
  return out;
}
