/**
 * What the peer client (transport-client.ts) keeps per peer, and its connection pool: one undici Pool
 * per peer (HTTP/1.1 keep-alive), made on first use with the client's timeouts.
 */
import { buildConnector, Pool } from "undici";
import type { ForwardChannel } from "./channel-client.js";
import type { PeerAuth } from "./transport-auth.js";
import type { TransportTimeouts } from "./transport-timeouts.js";

/** Connections in each peer's pool (snapshots, messages, hello; forwards over HTTP when so set). */
export const PEER_POOL_CONNECTIONS = 8;

export interface PeerEntry {
  /** The peer's node id: what requests to it are signed for. */
  id: string;
  url: string;
  /** Its connection pool: made on first use, closed when the peer falls out of the connected ones. */
  pool: Pool | undefined;
  /**
   * How its pools connect (TLS modes), kept across pools: its TLS session cache lets a pool made again
   * after a release resume the session instead of a full handshake with certificate checks.
   */
  connector: buildConnector.connector | undefined;
  /** The forward channel, opened on first use; undefined in HTTP mode or for a peer without one. */
  channel: ForwardChannel | undefined;
  /** Forwards carry the prompt text (false once the peer's hello said its engine needs tokens only). */
  promptText: boolean;
  /**
   * Shared-secret mode: its channel's 101 answer must carry a channel MAC (auth/channel-mac.ts); false
   * once its checked hello showed a build before that MAC, true again once a 101 of it carries a valid
   * one (it upgraded). Unknown (no hello noted yet): required.
   */
  acceptMac: boolean;
  /** When its hello was last read again for a 101 without the MAC (ACCEPT_MAC_RECHECK_MS apart). */
  acceptMacCheckedAt: number | undefined;
  /** When a 101 of it last carried its valid MAC (which turns `acceptMac` back on). */
  acceptMacSeenAt: number | undefined;
}

/** Makes the peer's pool (it has none), keeping its connector for the next. */
export function openPool(peer: PeerEntry, auth: PeerAuth, t: TransportTimeouts): Pool {
  const tls = auth.connectOptions(peer.id);
  if (tls) peer.connector ??= buildConnector({ ...tls, timeout: t.connectMs });
  peer.pool = new Pool(new URL(peer.url).origin, {
    connections: PEER_POOL_CONNECTIONS,
    pipelining: 1,
    keepAliveTimeout: 30_000,
    connectTimeout: t.connectMs,
    headersTimeout: t.firstByteMs,
    bodyTimeout: t.gapMs,
    ...(peer.connector ? { connect: peer.connector } : {}),
  });
  return peer.pool;
}
