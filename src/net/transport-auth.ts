/**
 * How the peer transport authenticates, in one interface with three modes: mutual TLS (the identity is
 * the certificate's node id; strangers are refused at the handshake), shared-secret HMAC (signed
 * requests with a replay window) and insecure (the sender header is trusted; only with --insecure).
 */
import type { Socket } from "node:net";
import {
  type ChannelAccept,
  type ChannelBinding,
  channelAcceptTag,
  checkChannelAcceptTag,
  type FrameMac,
  frameMac,
} from "./auth/channel-mac.js";
import {
  type BodyDigest,
  checkHelloProof,
  DEFAULT_WINDOW_MS,
  HEADER_NONCE,
  HEADER_SENDER,
  HEADER_SIGNATURE,
  helloProof,
  PeerRequestVerifier,
  signPeerRequest,
  type VerifyFailure,
} from "./auth/hmac.js";
import {
  type ResponseOpener,
  type ResponseSealer,
  requestBinding,
  responseOpener,
  responseSealer,
} from "./auth/response-mac.js";
import { clientTlsOptions, peerIdFromTlsSocket, serverTlsOptions, type TlsMaterial } from "./auth/tls.js";
import { isNodeId } from "./node-id.js";
import { HELLO_PATH, PROTOCOL_VERSION } from "./transport-wire.js";

export { ANY_DESTINATION } from "./auth/hmac.js";

export interface IncomingPeerRequest {
  method: string;
  /** Path with query, as sent. */
  path: string;
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The body, or (a large one kept in chunks) its digest taken as it arrived. */
  body: Uint8Array | BodyDigest | undefined;
  socket: Socket;
}

export interface OutgoingPeerRequest {
  method: string;
  /** Path with query, as it will be sent. */
  path: string;
  body: Uint8Array | undefined;
  /** The peer's node id, or ANY_DESTINATION when asking an address who it is. */
  to: string;
  /** The request's own headers; in shared-secret mode its `x-prefixmesh-*` ones are signed. */
  headers?: Record<string, string>;
}

/** What a channel's 101 answer says (its tag also covers the upgrade's signature: channel-mac.ts). */
export type AcceptAnswer = Omit<ChannelAccept, "signature">;

export type AuthResult =
  | { ok: true; sender: string }
  /** `clockMs`: shared-secret mode, a timestamp outside the window: this node's clock (hmac.ts). */
  | { ok: false; reason: VerifyFailure | "no-client-cert"; clockMs?: number };

export interface PeerAuth {
  readonly mode: "mtls" | "hmac" | "insecure";
  /** Shared-secret mode: the clock requests are signed by (epoch ms), which a clock skew is measured against. */
  readonly clock?: () => number;
  /** The headers to send with a request: its own plus the HMAC signature, or the plain sender id. */
  sign(req: OutgoingPeerRequest): Record<string, string>;
  verify(req: IncomingPeerRequest): AuthResult;
  /** undici `connect` options for a pool to peer `peerId` (TLS pinned to that id). */
  connectOptions(peerId: string | undefined): Record<string, unknown> | undefined;
  /** https options for the peer server, or undefined for plain HTTP. */
  serverTls(): Record<string, unknown> | undefined;
  /**
   * Per-frame integrity for a forward channel between this node and `peer`, opened by a request signed
   * with `nonce` (shared-secret mode only: TLS already protects frames, insecure mode protects nothing).
   */
  channelMac(nonce: string, peer: string, side: "client" | "server"): FrameMac | undefined;
  /**
   * Shared-secret mode: the tag of our `101` answer to the channel upgrade with these (verified)
   * headers from `peer` (channel-mac.ts). Absent in the other modes: under mutual TLS the 101 travels
   * inside TLS pinned to our certificate, which already proves who answered; insecure mode proves nothing.
   */
  sealChannelAccept?(
    requestHeaders: IncomingPeerRequest["headers"],
    peer: string,
    accept: AcceptAnswer,
  ): string | undefined;
  /** Shared-secret mode: whether `tag` is `peer`'s 101 answer to the upgrade we sent with `sent`. */
  checkChannelAccept?(
    sent: Readonly<Record<string, string>>,
    peer: string,
    accept: AcceptAnswer,
    tag: unknown,
  ): boolean;
  /**
   * Shared-secret mode: authenticates our HTTP answer to the verified request with these headers
   * (response-mac.ts); undefined in the other modes, or for a request that was not signed.
   */
  responseSealer(requestHeaders: IncomingPeerRequest["headers"]): ResponseSealer | undefined;
  /** Shared-secret mode: checks the answer to the request we sent with these (signed) headers. */
  responseOpener(requestHeaders: Readonly<Record<string, string>>): ResponseOpener | undefined;
  /**
   * Shared-secret mode: the proof of our id on a hello answered to `requester`'s challenge (mutual
   * TLS needs none: the connection is pinned to the peer's certificate; insecure mode has none).
   */
  proveHello?(requester: string, challenge: string, body: string): string | undefined;
  /** Whether a hello answered by `peer` proves its id (true where the connection already does). */
  checkHelloProof?(peer: string, challenge: string, body: string, proof: string | undefined): boolean;
}

/**
 * The peer port's one gate, for its requests and its channel upgrades alike: authenticated (else 401)
 * and, unless `member` is false, a member of this cluster (else 403). Every refusal is reported to
 * `onAuthRejected` with its reason; a refused message never reaches a tree or an engine.
 */
export function admitPeer(
  auth: PeerAuth,
  /** The peer server's handlers (membership, and where refusals are reported). */
  handlers: { isKnownPeer(id: string): boolean; onAuthRejected?(reason: string): void },
  req: IncomingPeerRequest,
  member = true,
): { ok: true; sender: string } | { ok: false; status: 401 | 403; error: string; clockMs?: number } {
  const r = auth.verify(req);
  if (!r.ok) {
    handlers.onAuthRejected?.(r.reason);
    const why =
      r.reason === "old-protocol"
        ? `${r.reason} (signed as peer protocol 1; this node speaks ${PROTOCOL_VERSION}: upgrade the peer)`
        : r.clockMs !== undefined
          ? `${r.reason} (timestamp over ${DEFAULT_WINDOW_MS / 1000} s from this node's clock, sent as clockMs: a clock is off)`
          : r.reason;
    const error = `peer authentication failed: ${why}`;
    // The clock it was judged by: the sender names its skew from it (net/clock-skew.ts).
    return r.clockMs === undefined
      ? { ok: false, status: 401, error }
      : { ok: false, status: 401, error, clockMs: r.clockMs };
  }
  if (member && !handlers.isKnownPeer(r.sender)) {
    handlers.onAuthRejected?.("unknown-peer");
    return { ok: false, status: 403, error: `'${r.sender}' is not a member of this cluster` };
  }
  return r;
}

export function mtlsAuth(material: TlsMaterial): PeerAuth {
  // The certificate is fixed for a connection's life: read it once per socket, not per request.
  const ids = new WeakMap<Socket, string | undefined>();
  return {
    mode: "mtls",
    sign: (req) => ({ ...req.headers }),
    verify(req) {
      let id = ids.get(req.socket);
      if (id === undefined) {
        id = peerIdFromTlsSocket(req.socket);
        ids.set(req.socket, id);
      }
      return id ? { ok: true, sender: id } : { ok: false, reason: "no-client-cert" };
    },
    connectOptions: (peerId) => clientTlsOptions(material, peerId),
    serverTls: () => serverTlsOptions(material),
    channelMac: () => undefined,
    responseSealer: () => undefined,
    responseOpener: () => undefined,
  };
}

export function hmacAuth(selfId: string, secret: Uint8Array, now: () => number = Date.now): PeerAuth {
  const verifier = new PeerRequestVerifier({ secret, self: selfId });
  return {
    mode: "hmac",
    clock: now,
    sign: (req) => ({
      ...req.headers,
      ...signPeerRequest({
        secret,
        sender: selfId,
        destination: req.to,
        method: req.method,
        path: req.path,
        body: req.body,
        ...(req.headers ? { headers: req.headers } : {}),
        now: now(),
      }),
    }),
    verify: (req) =>
      verifier.verify({
        method: req.method,
        path: req.path,
        headers: req.headers,
        body: req.body,
        now: now(),
        // Only the hello may be addressed to whoever listens: it tells what the node would tell
        // anyone in the cluster and changes nothing, and a prober knows an address, not an id.
        anyDestination: req.method === "GET" && req.path === HELLO_PATH,
      }),
    connectOptions: () => undefined,
    serverTls: () => undefined,
    channelMac: (nonce, peer, side) =>
      frameMac(
        secret,
        side === "client" ? { nonce, client: selfId, server: peer } : { nonce, client: peer, server: selfId },
        side,
      ),
    sealChannelAccept(h, peer, accept) {
      const nonce = h[HEADER_NONCE];
      const signature = h[HEADER_SIGNATURE];
      if (typeof nonce !== "string" || typeof signature !== "string") return undefined;
      return channelAcceptTag(secret, { nonce, client: peer, server: selfId }, { ...accept, signature });
    },
    checkChannelAccept(sent, peer, accept, tag) {
      const binding: ChannelBinding = { nonce: sent[HEADER_NONCE] ?? "", client: selfId, server: peer };
      return checkChannelAcceptTag(
        secret,
        binding,
        { ...accept, signature: sent[HEADER_SIGNATURE] ?? "" },
        tag,
      );
    },
    responseSealer: (h) => (requestBinding(h) ? responseSealer(secret, h) : undefined),
    responseOpener: (h) => responseOpener(secret, h),
    proveHello: (requester, challenge, body) => helloProof(secret, selfId, requester, challenge, body),
    checkHelloProof: (peer, challenge, body, proof) =>
      checkHelloProof(secret, peer, selfId, challenge, body, proof),
  };
}

/** No authentication: the sender header is taken at its word. Refused for clusters unless --insecure. */
export function insecureAuth(selfId: string): PeerAuth {
  return {
    mode: "insecure",
    sign: (req) => ({ ...req.headers, [HEADER_SENDER]: selfId }),
    verify(req) {
      const s = req.headers[HEADER_SENDER];
      return typeof s === "string" && isNodeId(s)
        ? { ok: true, sender: s }
        : { ok: false, reason: "missing" };
    },
    connectOptions: () => undefined,
    serverTls: () => undefined,
    channelMac: () => undefined,
    responseSealer: () => undefined,
    responseOpener: () => undefined,
  };
}
