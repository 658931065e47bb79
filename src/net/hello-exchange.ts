/**
 * The peer client's hellos that prove who answered (transport-client.ts): a registered peer's, pinned
 * to its id, and an address's that is not a peer yet, on a one-off connection.
 */
import { randomBytes } from "node:crypto";
import type { PeerCertificate } from "node:tls";
import { Client, type Pool } from "undici";
import { checkAnswer } from "./answer-check.js";
import { readBoundedBytes } from "./answer-stream.js";
import { HEADER_CHALLENGE, HEADER_PROOF } from "./auth/hmac.js";
import { peerIdFromCert } from "./auth/tls.js";
import { type ProbeAddresses, recordingConnector } from "./probe-addresses.js";
import { ANY_DESTINATION, type PeerAuth } from "./transport-auth.js";
import { classify, TransportError } from "./transport-error.js";
import type { TransportTimeouts } from "./transport-timeouts.js";
import { HELLO_PATH } from "./transport-wire.js";
import { explainCutOff } from "./wrong-port.js";

/**
 * The hello of `id` at its registered address, with proof that `id` answered it: over mutual TLS
 * the connection is pinned to `id`'s certificate from the cluster CA; with a shared secret the answer
 * carries an HMAC over a fresh challenge (hmac.ts, helloProof). Rejects with a TransportError
 * "protocol" ("proof") when the proof is missing or wrong: whoever answered is not `id` of ours.
 * `pool`: the peer's pool, taken once the request is signed.
 */
export async function verifiedHello(
  auth: PeerAuth,
  t: TransportTimeouts,
  id: string,
  pool: () => Pool,
): Promise<unknown> {
  const challenge = randomBytes(16).toString("hex");
  const path = HELLO_PATH;
  try {
    const headers = auth.sign({
      method: "GET",
      path,
      body: undefined,
      to: id,
      headers: { [HEADER_CHALLENGE]: challenge },
    });
    const { text, proof } = await getHello(pool(), auth, t, headers, `peer ${id}`);
    const check = auth.checkHelloProof;
    if (check && !check(id, challenge, text, proof))
      throw new TransportError("protocol", `peer ${id}: hello without a valid proof of its id (proof)`);
    return parseHello(text, `peer ${id}`);
  } catch (err) {
    throw classify(err);
  }
}

/**
 * Asks an address that is not a peer yet who it is (`GET /peer/hello`, signed in shared-secret
 * mode), on a one-off connection: DNS gives addresses, not ids, so the TLS check cannot be pinned to
 * an id yet — it only requires a certificate from the cluster CA, and reports the id that
 * certificate names (`certId`) so the caller can hold the announced id against it. Returns the raw
 * answer (validate it with `checkPeerHello`).
 */
/** `seen`, if given, gets what the URL's host resolved to and which address answered (probe-addresses.ts). */
export async function probeHello(
  auth: PeerAuth,
  t: TransportTimeouts,
  url: string,
  seen?: ProbeAddresses,
): Promise<{ hello: unknown; certId: string | undefined }> {
  const base = auth.connectOptions(undefined);
  let certId: string | undefined;
  const check = base?.checkServerIdentity as
    | ((host: string, cert: PeerCertificate) => Error | undefined)
    | undefined;
  const connect =
    base && check
      ? {
          ...base,
          checkServerIdentity: (host: string, cert: PeerCertificate) => {
            const err = check(host, cert);
            if (err === undefined) certId = peerIdFromCert(cert);
            return err;
          },
        }
      : base;
  const origin = new URL(url);
  const client = new Client(origin.origin, {
    connectTimeout: t.connectMs,
    headersTimeout: t.messageTotalMs,
    bodyTimeout: t.messageTotalMs,
    pipelining: 0,
    ...(seen
      ? { connect: recordingConnector(origin.hostname, connect, t.connectMs, seen) }
      : connect
        ? { connect }
        : {}),
  });
  try {
    const path = HELLO_PATH;
    // Whoever answers there: the id is what this asks.
    const headers = auth.sign({ method: "GET", path, body: undefined, to: ANY_DESTINATION });
    const { text } = await getHello(client, auth, t, headers, url);
    return { hello: parseHello(text, url), certId };
  } catch (err) {
    throw await explainCutOff(url, classify(err), t.connectMs);
  } finally {
    void client.destroy().catch(() => {});
  }
}

/** `GET /peer/hello` with the signed `headers` on `d`: the answer's text (bounded) and proof header. */
async function getHello(
  d: Pool | Client,
  auth: PeerAuth,
  t: TransportTimeouts,
  headers: Record<string, string>,
  who: string,
): Promise<{ text: string; proof: string | undefined }> {
  const path = HELLO_PATH;
  const res = await d.request({
    method: "GET",
    path,
    signal: AbortSignal.timeout(t.messageTotalMs),
    headers,
  });
  const bytes = await readBoundedBytes(res.body, 64 * 1024);
  const text = bytes.toString("utf8");
  checkAnswer(who, auth, headers, res, bytes, `${path}: ${text}`, 200);
  const proof = res.headers[HEADER_PROOF];
  return { text, proof: typeof proof === "string" ? proof : undefined };
}

function parseHello(text: string, who: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new TransportError("protocol", `${who}: hello is not JSON`);
  }
}
