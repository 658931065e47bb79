/** What the peer server (HTTP routes and the forward channel) hands to the node runtime: decoded messages. */
import type { ForwardReplyStream } from "./reply-stream.js";
import type { ForwardMsg, LoneMessage } from "./transport-wire.js";
import type { PeerHello } from "./wire-schemas.js";

export interface PeerServerHandlers {
  hello(): PeerHello;
  /** Only configured (or discovered) peers may talk to us; others get 403. */
  isKnownPeer(id: string): boolean;
  /**
   * A message that came on its own (a snapshot, a reply without an open stream, a cancel, a goodbye),
   * decoded and validated: one that does not decode was answered 400 and never gets here.
   * `wireBytes`: the size of its body on the wire.
   */
  onMessage(from: string, msg: LoneMessage, wireBytes: number): void;
  onForward(from: string, msg: ForwardMsg, reply: ForwardReplyStream): void;
  /**
   * gossip "scuttlebutt": a mesh message's body (mesh-wire.ts) from an authenticated sender, member or
   * not (a joiner). Returns why it was refused (answered 400), or undefined. Absent: answered 404.
   */
  onMesh?(from: string, body: Uint8Array): string | undefined;
  /** A request failed authentication (it was answered 401 and went no further). */
  onAuthRejected?(reason: string): void;
}
