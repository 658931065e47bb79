/**
 * How a peer message failed, as the runtime needs to know it: a refused or reset connection, a
 * timeout, a stream cut off before its final record, a refusal (HTTP status), an abort, or garbage.
 */
export type TransportFailure = "connection" | "timeout" | "cut-off" | "http" | "aborted" | "protocol";

export class TransportError extends Error {
  constructor(
    readonly kind: TransportFailure,
    message: string,
    readonly status?: number,
    /**
     * Shared-secret mode: the answer this failure read carried no valid response MAC (response-mac.ts),
     * so what it says — a refusal, garbage — may be an on-path party's, not the peer's: it proves
     * nothing about the peer (no verdict on its credential may rest on it).
     */
    readonly unauthenticated = false,
    /**
     * A 401 refusing our signed timestamp (clock-skew.ts): our clock minus the peer's, in ms. The
     * fix is a clock, not the credential.
     */
    readonly clockSkewMs?: number,
    /**
     * A check of ours refused what came back as not the peer's (e.g. CHANNEL_ACCEPT_REFUSED): the
     * reason it is counted under, beside the peer port's authentication refusals.
     */
    readonly authRefusal?: string,
    /**
     * What answered is no peer port this node can use (an API port, TLS against plain or plain
     * against TLS: wrong-port.ts), so the address given is wrong, not the peer down.
     */
    readonly wrongAddress = false,
    /**
     * The TLS handshake failed on a certificate (another cluster's CA, or one expired): the peer is up,
     * and waiting will not fix it; the message says which.
     */
    readonly certRefused = false,
  ) {
    super(message);
    this.name = "TransportError";
  }
}

/** A forward channel's 101 answer without its peer's valid channel MAC (auth/channel-mac.ts). */
export const CHANNEL_ACCEPT_REFUSED = "channel-accept";

const CONNECTION_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "ERR_TLS_CERT_ALTNAME_INVALID",
]);
/** Handshakes refused for want of a common cluster CA, either side's verdict. */
const FOREIGN_CA_CODES = new Set([
  "SELF_SIGNED_CERT_IN_CHAIN",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_SIGNATURE_FAILURE",
  "ERR_SSL_TLSV1_ALERT_UNKNOWN_CA",
]);
const EXPIRED_CODES = new Set([
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED",
]);
// OpenSSL's words ("self-signed certificate in certificate chain") do not say the likely mistake.
export const FOREIGN_CA =
  "the peer's certificate is not from this node's cluster CA, or this node's not from the peer's: " +
  "its --tls-dir and this node's hold different ca.crt files (another cluster, or a CA made again)";
const EXPIRED =
  "a certificate of this node or the peer is expired or not yet valid (compare both clocks; " +
  "renew: prefixmesh certs issue --force, then restart that node)";
const TIMEOUT_CODES = new Set(["UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]);

/** A TLS client answered in plain text: what OpenSSL says, whichever error object carries it. */
const TLS_TO_PLAIN = /wrong version number|ERR_SSL_WRONG_VERSION_NUMBER/;
const PLAIN_ANSWER =
  "ERR_SSL_WRONG_VERSION_NUMBER: the address answers without TLS: a node's API port (--listen) " +
  "rather than its peer port (--peer-listen), or a node without --tls-dir?";

export function classify(err: unknown): TransportError {
  if (err instanceof TransportError) return err;
  let e = err as (Error & { code?: string; cause?: unknown; name?: string }) | undefined;
  for (let depth = 0; e && depth < 4; depth++) {
    if (e.name === "TimeoutError" || (e.code && TIMEOUT_CODES.has(e.code))) {
      return new TransportError("timeout", e.message);
    }
    // OpenSSL's own words ("ssl3_get_record:wrong version number") do not say the likely mistake.
    if (TLS_TO_PLAIN.test(`${e.code} ${e.message}`))
      return new TransportError("connection", PLAIN_ANSWER, undefined, false, undefined, undefined, true);
    const cert =
      e.code && FOREIGN_CA_CODES.has(e.code) ? FOREIGN_CA : e.code && EXPIRED_CODES.has(e.code) && EXPIRED;
    if (cert)
      return new TransportError(
        "connection",
        `${e.code}: ${cert}`,
        undefined,
        false,
        undefined,
        undefined,
        false,
        true,
      );
    if (e.code && CONNECTION_CODES.has(e.code))
      return new TransportError("connection", `${e.code}: ${e.message}`);
    if (e.name === "AbortError" || e.code === "UND_ERR_ABORTED") {
      // An abort whose reason is a timeout is a timeout.
      if (e.cause && (e.cause as Error).name === "TimeoutError")
        return new TransportError("timeout", e.message);
      return new TransportError("aborted", e.message);
    }
    e = e.cause as typeof e;
  }
  const m = (err as Error)?.message ?? String(err);
  // TLS handshake refusals and other socket-level failures: the peer is unreachable for us.
  return new TransportError("connection", m);
}
