/** What the peer server (HTTP routes and the forward channel) hands to the node runtime. */
import type { ForwardReplyStream } from "./reply-stream.js";
import type { ForwardMsg, messageWireSchema, PeerHello, SnapshotMeta } from "./transport-wire.js";

export type IncomingMessage = import("zod").infer<typeof messageWireSchema>;

export interface PeerServerHandlers {
  hello(): PeerHello;
  /** Only configured (or discovered) peers may talk to us; others get 403. */
  isKnownPeer(id: string): boolean;
  /** A snapshot's codec bytes; throw to refuse it (400). */
  onSnapshot(from: string, bytes: Uint8Array, meta: SnapshotMeta): void;
  onForward(from: string, msg: ForwardMsg, reply: ForwardReplyStream): void;
  onMessage(from: string, msg: IncomingMessage): void;
  /** A request failed authentication (it was answered 401 and went no further). */
  onAuthRejected?(reason: string): void;
}
