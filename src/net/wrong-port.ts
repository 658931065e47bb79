/**
 * What an address that is no peer port of ours turned out to be, told from what it answered: an
 * operator who gave a node a member's API port, or the wrong scheme, reads the mistake in the log
 * instead of a bare 404 or "other side closed". Never guessed from port numbers.
 */
import { isIP } from "node:net";
import { connect, type PeerCertificate } from "node:tls";
import { peerIdFromCert } from "./auth/tls.js";
import { FOREIGN_CA, TransportError } from "./transport-error.js";

/** Most bytes of a refusal's body read as JSON for its shape (a peer-controlled size). */
const MAX_SHAPE_BYTES = 4096;

/**
 * Why a 404 from `status`/`body` means the address is no peer port, or undefined. A peer port
 * answers a path it has no route for with `{"error": "…"}` (transport-server.ts: a member of another
 * build, undefined here), so a 404 whose body is an OpenAI-style error (`{"error": {"message",
 * "type"}}`) is an OpenAI-compatible API: most likely a node's API port (--listen).
 */
export function wrongPortAnswer(status: number, body: Uint8Array): string | undefined {
  if (status !== 404) return undefined;
  const shape = body.byteLength <= MAX_SHAPE_BYTES ? errorShape(body) : undefined;
  // A peer port's own 404 (a path its build does not have, gossip it does not run) is a version or
  // configuration mismatch between members: said as the plain 404 it is, not as a wrong address.
  if (shape?.peerPort) return undefined;
  if (shape === undefined)
    return "the address answers HTTP 404 to a peer path: it is no prefixmesh peer port (--peer-listen)";
  const who = /^no route [A-Z]+ \/peer\//.test(shape.message)
    ? "a prefixmesh node's API port"
    : "an OpenAI-style API";
  return (
    `the address answers as ${who} (--listen), not as a peer port: give the member's ` +
    "peer-port address (its --peer-listen, default port 9080)"
  );
}

/**
 * An error body's message: a peer port's (`{"error": "…"}`, transport-server.ts) or an OpenAI-style
 * one (`{"error": {"message", "type"}}`); undefined if the body has another shape.
 */
function errorShape(body: Uint8Array): { message: string; peerPort: boolean } | undefined {
  try {
    const v = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8")) as {
      error?: string | { message?: unknown; type?: unknown };
    };
    const e = v?.error;
    if (typeof e === "string") return { message: e, peerPort: true };
    if (e && typeof e === "object" && typeof e.message === "string" && typeof e.type === "string")
      return { message: e.message, peerPort: false };
  } catch {
    // Not JSON: another shape.
  }
  return undefined;
}

/** Said of an http:// address that completed a TLS handshake. */
export const TLS_ANSWER =
  "the address speaks TLS, but its URL is http://: a peer port of a node with --tls-dir " +
  "(this node needs --tls-dir from the same cluster CA, and https:// peer URLs)";

/**
 * Whether `host:port` speaks TLS: it answered a ClientHello with a handshake or a TLS alert, within
 * `timeoutMs`. Asked only after a plain request there was cut off without an answer (a TLS server
 * reading plain text closes without a byte), once per failed hello, so it costs one connection at the
 * hello's own pace. Nothing is sent after the handshake and no certificate is trusted for anything.
 */
export function speaksTls(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (yes: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(yes);
    };
    let socket: ReturnType<typeof connect>;
    try {
      socket = connect({ host, port, rejectUnauthorized: false });
    } catch {
      // An address node:tls refuses outright (e.g. a bad port) is no TLS port: the hello's error stands.
      return resolve(false);
    }
    const timer = setTimeout(() => finish(false), timeoutMs);
    timer.unref();
    socket.once("secureConnect", () => finish(true));
    // An alert the server sent is a TLS record: it speaks TLS (e.g. it wants a client certificate).
    // `on`, not `once`: a second 'error' after the first must not go unhandled (finish ignores it).
    socket.on("error", (err: Error & { code?: string }) =>
      finish(/ALERT/.test(`${err.code ?? ""} ${err.message}`)),
    );
    socket.once("close", () => finish(false));
  });
}

/** Whether a classified failure may be a TLS port read as plain text: connected, then cut off. */
function cutOffWithoutAnswer(err: TransportError): boolean {
  return (
    err.kind === "connection" &&
    /UND_ERR_SOCKET|ECONNRESET|other side closed|socket hang up/.test(err.message)
  );
}

/** Longest a TLS check of a cut-off hello waits for the handshake. */
const TLS_CHECK_MAX_MS = 2_000;

/**
 * `err`, the failure of a hello to the http:// `url`, explained when the address turns out to speak
 * TLS (speaksTls); else `err` unchanged. Still a "connection" failure: retried as before.
 */
export async function explainCutOff(
  url: string,
  err: TransportError,
  timeoutMs: number,
): Promise<TransportError> {
  if (!cutOffWithoutAnswer(err)) return err;
  const at = addressOf(url, "http:");
  if (at === undefined) return err;
  if (!(await speaksTls(at.host, at.port, Math.min(timeoutMs, TLS_CHECK_MAX_MS)))) return err;
  return new TransportError(
    "connection",
    `${TLS_ANSWER} (${err.message})`,
    undefined,
    false,
    undefined,
    undefined,
    true,
  );
}

/** Longest a foreign certificate's subject or issuer is quoted (the remote's words). */
const MAX_NAME_CHARS = 48;

/**
 * The certificate `host:port` presents, trusted for nothing: read to tell a member of another
 * cluster's CA from a TLS service that is no prefixmesh node at all. Nothing is sent after the
 * handshake; undefined when none completes within `timeoutMs`.
 */
export function certificateAt(
  host: string,
  port: number,
  timeoutMs: number,
): Promise<PeerCertificate | undefined> {
  return new Promise((resolve) => {
    let done = false;
    let socket: ReturnType<typeof connect>;
    const finish = (cert: PeerCertificate | undefined) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket?.destroy();
      resolve(cert);
    };
    const timer = setTimeout(() => finish(undefined), timeoutMs);
    timer.unref();
    try {
      // A name (not an address) is sent as SNI, so a service of several names shows the one asked for.
      socket = connect({
        host,
        port,
        rejectUnauthorized: false,
        ...(isIP(host) ? {} : { servername: host }),
      });
    } catch {
      return finish(undefined);
    }
    socket.once("secureConnect", () => {
      const cert = socket.getPeerCertificate();
      finish(cert && Object.keys(cert).length > 0 ? cert : undefined);
    });
    socket.on("error", () => finish(undefined));
    socket.once("close", () => finish(undefined));
  });
}

/** A certificate's distinguished name in a line, CN first, printable and bounded (the remote's text). */
function nameOf(dn: PeerCertificate["subject"] | undefined): string {
  const parts = Object.entries(dn ?? {})
    .sort(([a], [b]) => Number(b === "CN") - Number(a === "CN"))
    .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join("+") : v}`);
  const s = parts.join(", ").replace(/[^\x20-\x7e]/g, "?");
  return s.length > MAX_NAME_CHARS ? `${s.slice(0, MAX_NAME_CHARS)}…` : s || "(empty)";
}

/** Said of an https:// address whose certificate names no prefixmesh node, quoting it. */
export function foreignService(cert: Pick<PeerCertificate, "subject" | "issuer">): string {
  const subject = nameOf(cert.subject);
  const issuer = nameOf(cert.issuer);
  return (
    `no prefixmesh peer port: a TLS service whose certificate (${subject}, ` +
    `${issuer === subject ? "self-signed" : `issued by ${issuer}`}) names no prefixmesh node; ` +
    "give a member's --peer-listen address"
  );
}

/**
 * `err`, a hello to the https:// `url` refused because its certificate is not from this node's
 * cluster CA, explained when the certificate there names no prefixmesh node (a web server, another
 * service: not "a different ca.crt"); else `err` unchanged. Asked once per failed hello to a seed
 * or static peer, and at most once a minute per member the mesh fails to reach for its certificate;
 * a wrong address (`wrongAddress`), retried as before.
 */
export async function explainForeignCert(
  url: string,
  err: TransportError,
  timeoutMs = TLS_CHECK_MAX_MS,
): Promise<TransportError> {
  if (!err.certRefused || !err.message.endsWith(FOREIGN_CA)) return err;
  const at = addressOf(url, "https:");
  if (at === undefined) return err;
  const cert = await certificateAt(at.host, at.port, Math.min(timeoutMs, TLS_CHECK_MAX_MS));
  if (cert === undefined || peerIdFromCert(cert) !== undefined) return err;
  return new TransportError("connection", foreignService(cert), undefined, false, undefined, undefined, true);
}

/** The host (an IPv6 literal unbracketed) and port of `url` when it parses with `scheme`, else undefined. */
function addressOf(url: string, scheme: "http:" | "https:"): { host: string; port: number } | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  if (u.protocol !== scheme) return undefined;
  return {
    host: u.hostname.replace(/^\[|\]$/g, ""),
    port: Number(u.port || (scheme === "https:" ? 443 : 80)),
  };
}
