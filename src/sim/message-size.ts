/**
 * Bytes per message for the simulator's accounting. Snapshots: exactly what the codec would send
 * (`encodedSize`, cached per snapshot object since one snapshot goes to many peers) plus the ack and
 * block count that travel beside it. Other messages: an estimate of the daemon's wire format (a
 * small envelope + 4 bytes per prompt token + the output text) — stated as such in reports.
 */
import { gossipSize } from "../core/node/gossip/size.js";
import { swimSize } from "../core/node/swim/codec.js";
import type { MeshMessage, PeerMessage } from "../core/node/types.js";
import type { Snapshot } from "../core/snapshot.js";
import { encodedSize } from "../core/snapshot-codec.js";

const ENVELOPE = 48;
/** holds (epoch, version) + blocks, as varints. */
const SNAPSHOT_EXTRA = 16;
/** The RTT echo: the send time `at` (a ms timestamp as a varint) and `echo` (t + heldMs). */
const ECHO_AT = 7;
const ECHO = 10;
/** A forward-ack's epoch: a ms timestamp as a varint, like `at`. */
const EPOCH = 7;

// One anti-entropy round sends the same snapshot object to every peer back to back: remembering
// the last one is enough (a WeakMap costs more than it saves here).
let lastSnap: Snapshot | undefined;
let lastSize = 0;

export function snapshotBytes(s: Snapshot): number {
  if (s !== lastSnap) {
    lastSize = encodedSize(s);
    lastSnap = s;
  }
  return lastSize;
}

export function messageKind(msg: PeerMessage): string {
  if (msg.type !== "snapshot") return msg.type;
  switch (msg.snapshot.kind) {
    case "full":
      return "snapshot-full";
    case "delta":
      return "snapshot-delta";
    case "heartbeat":
      return "heartbeat";
  }
}

export function messageBytes(msg: PeerMessage): number {
  switch (msg.type) {
    case "snapshot":
      return (
        snapshotBytes(msg.snapshot) +
        SNAPSHOT_EXTRA +
        (msg.at === undefined ? 0 : ECHO_AT) +
        (msg.echo === undefined ? 0 : ECHO)
      );
    case "forward":
      return ENVELOPE + msg.reqId.length + 4 * msg.request.tokens.length;
    case "result":
      return ENVELOPE + msg.reqId.length + msg.result.text.length + 32;
    case "error":
      return ENVELOPE + msg.reqId.length + msg.error.length;
    case "cancel":
      return ENVELOPE + msg.reqId.length;
    case "forward-ack":
      // attempt, etaMs and the epoch (a ms timestamp) as varints beside the envelope, like cancel's.
      return (
        ENVELOPE +
        msg.reqId.length +
        (msg.etaMs === undefined ? 0 : 4) +
        (msg.epoch === undefined ? 0 : EPOCH)
      );
    case "goodbye":
      return ENVELOPE;
  }
}

/** A mesh message's kind: "swim-ping", "gossip-digest", … */
export function meshKind(m: MeshMessage): string {
  return `${m.channel}-${m.msg.type}`;
}

/** A mesh message's exact encoded bytes plus its channel byte (no request envelope: a datagram). */
export function meshBytes(m: MeshMessage): number {
  return 1 + (m.channel === "swim" ? swimSize(m.msg) : gossipSize(m.msg));
}
