/**
 * Which versions of our tree a peer holds, as anti-entropy's sends and the peer's acks tell it: the
 * sends not yet confirmed, what an ack confirms, and the version the peer's next update builds on.
 */
import { invariant } from "../invariant.js";
import type { RadixTree } from "../radix-tree.js";
import type { NodeConfig } from "./config.js";
import type { PeerSync } from "./peer-sync.js";
import type { HeldVersion } from "./types.js";

/** Unconfirmed sends remembered per peer (older ones are forgotten; the window check still holds). */
const MAX_UNCONFIRMED = 64;

/** We sent `peer` our tree at `version` (a delta or full snapshot): unconfirmed until its ack says so. */
export function noteSent(peer: PeerSync, version: number, now: number): void {
  const q = peer.unconfirmed;
  const last = q[q.length - 1];
  if (last === undefined || last.version !== version) {
    invariant(last === undefined || last.version < version, "our tree's version went back");
    q.push({ version, at: now });
    if (q.length > MAX_UNCONFIRMED) q.shift();
  }
}

/**
 * The peer told us which version of our tree (of `epoch`, ours) it holds. No ack = "nothing usable"
 * (first contact, restart, or a polluted estimate): forget our optimism so the next round sends a full
 * snapshot.
 */
export function takeAck(peer: PeerSync, holds: HeldVersion | undefined, epoch: number, now: number): void {
  peer.holdsOfUs = holds;
  // onEcho ran for this same message: its echo and its ack describe one moment of the peer.
  peer.ackSawAt = peer.echoed;
  const q = peer.unconfirmed;
  if (holds === undefined || holds.epoch !== epoch) {
    q.length = 0;
    return;
  }
  let confirmedAt: number | undefined;
  while (q.length > 0 && (q[0] as { version: number }).version <= holds.version) {
    const e = q.shift() as { version: number; at: number };
    if (e.version === holds.version) confirmedAt = e.at;
  }
  if (confirmedAt !== undefined) {
    const d = now - confirmedAt;
    peer.ackDelayMs = peer.ackDelayMs === undefined ? d : peer.ackDelayMs + (d - peer.ackDelayMs) / 8;
  }
}

/**
 * The version of our tree (of `epoch`) to build the peer's next update on (undefined: nothing usable
 * → full). What we sent recently is assumed delivered while its ack may still be in flight; once the
 * oldest unconfirmed send is clearly overdue (lost, or refused as "need-full"), fall back to the acked
 * version — usually still within our change log, so a delta rather than a full snapshot. Sooner
 * when its ack shows the send lost: it had received a later snapshot of ours yet holds less (a send
 * into a partition that healed would otherwise wait out the window) — only when a delta from the
 * acked version can be sent, so a large full snapshot still being applied in steps is not re-sent.
 */
export function baseFor(
  peer: PeerSync,
  now: number,
  rttMs: number | undefined,
  tree: Pick<RadixTree, "changesSince">,
  epoch: number,
  config: Pick<NodeConfig, "pollMs" | "pollJitter" | "suspectAfterPolls">,
): number | undefined {
  const ack = peer.holdsOfUs;
  const acked = ack !== undefined && ack.epoch === epoch ? ack.version : undefined;
  const q = peer.unconfirmed;
  if (q.length > 0) {
    const poll = config.pollMs * (1 + config.pollJitter);
    // Before any ack has been timed, guess from k and the forward RTT (a slow link may then get a
    // few early full snapshots — small, the tree is young — until the first ack is timed).
    const window =
      peer.ackDelayMs === undefined
        ? 2 * config.suspectAfterPolls * poll + 2 * (rttMs ?? 0)
        : 2 * peer.ackDelayMs + poll;
    const sentAt = (q[0] as { at: number }).at;
    const lost =
      acked !== undefined &&
      peer.ackSawAt !== undefined &&
      peer.ackSawAt > sentAt &&
      tree.changesSince(acked) !== undefined;
    if (!lost && now - sentAt <= window) return (q[q.length - 1] as { version: number }).version;
    q.length = 0;
  }
  return acked;
}
