/**
 * Gossip bytes by send time (a measurement, not part of the protocol): the scale report needs the
 * bytes after the cluster has formed apart from those of its start-up, so every gossip message's
 * bytes land in a fixed-width bucket of virtual time, membership (heartbeats, SWIM) apart.
 */

/** Width of a bucket, virtual ms (the same as the hit-rate-by-arrival buckets). */
export const BYTES_BUCKET_MS = 250;

export interface BytesByTime {
  bucketMs: number;
  /** Bucket i: bytes sent in [i, i + 1) × bucketMs; gossip includes membership. */
  gossip: number[];
  membership: number[];
}

export function newBytesByTime(bucketMs = BYTES_BUCKET_MS): BytesByTime {
  return { bucketMs, gossip: [], membership: [] };
}

/** Anti-entropy and membership kinds (traffic.ts's message kinds); forwards and answers are not gossip. */
export function isGossipKind(kind: string): boolean {
  return (
    kind.startsWith("snapshot") ||
    kind === "heartbeat" ||
    kind.startsWith("swim-") ||
    kind.startsWith("gossip-")
  );
}

export function isMembershipKind(kind: string): boolean {
  return kind === "heartbeat" || kind.startsWith("swim-");
}

/** Per message kind (a handful): 0 not gossip, 1 gossip, 2 membership — classified once, not per message. */
const classOf = new Map<string, 0 | 1 | 2>();

export function addBytesAt(into: BytesByTime, atMs: number, kind: string, bytes: number): void {
  let c = classOf.get(kind);
  if (c === undefined) {
    c = isMembershipKind(kind) ? 2 : isGossipKind(kind) ? 1 : 0;
    classOf.set(kind, c);
  }
  if (c === 0) return;
  const i = Math.max(0, Math.floor(atMs / into.bucketMs));
  while (into.gossip.length <= i) {
    into.gossip.push(0);
    into.membership.push(0);
  }
  into.gossip[i] = (into.gossip[i] as number) + bytes;
  if (c === 2) into.membership[i] = (into.membership[i] as number) + bytes;
}

/** Bytes sent in [fromMs, toMs) (whole buckets from the one holding fromMs on). */
export function bytesBetween(
  b: BytesByTime,
  fromMs: number,
  toMs: number,
): { gossip: number; membership: number } {
  let gossip = 0;
  let membership = 0;
  const [start, end] = bucketRange(b.bucketMs, fromMs, toMs, b.gossip.length);
  for (let i = start; i < end; i++) {
    gossip += b.gossip[i] as number;
    membership += b.membership[i] as number;
  }
  return { gossip, membership };
}

/** Buckets [start, end) of `length` recorded ones covering [fromMs, toMs): whole buckets from fromMs's. */
export function bucketRange(
  bucketMs: number,
  fromMs: number,
  toMs: number,
  length: number,
): [number, number] {
  return [Math.floor(fromMs / bucketMs), Math.min(length, Math.ceil(toMs / bucketMs))];
}
