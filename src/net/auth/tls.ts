/**
 * Mutual TLS between peers: TLS options for the peer server (fastify/https) and the peer client
 * (undici `connect`), and reading the authenticated node id off a connection. A node's identity is its
 * certificate's name (SAN URI prefixmesh://node/<id>, equal to the CN), never the host it dials.
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import { stat } from "node:fs/promises";
import type { Socket } from "node:net";
import type { PeerCertificate, TLSSocket } from "node:tls";
import { isNodeId } from "../node-id.js";
import { CertError, caPaths, NODE_URI_PREFIX, nodePaths, readBounded, readClusterId } from "./ca.js";

const MAX_PEM_BYTES = 64 * 1024;
/** A certificate this close to its end is warned of at start. */
const EXPIRY_WARN_DAYS = 30;

export interface TlsMaterial {
  /** This node's id (its certificate's identity). */
  id: string;
  clusterId: string;
  /** Cluster CA certificate (PEM): the only trust anchor for peers. */
  ca: string;
  cert: string;
  key: string;
  /** Non-fatal findings, e.g. a key file readable by others; worth logging. */
  warnings: string[];
  /** The CA's and this node's certificate's notAfter, epoch ms: a node running for months reports them. */
  notAfterMs: { ca: number; node: number };
}

/**
 * Loads and checks node `id`'s TLS material from `dir`: the certificate names `id`, was issued by the
 * cluster CA, matches the key and is currently valid. Any mismatch is a clear CertError at startup,
 * not a handshake failure later.
 */
export async function loadTlsMaterial(dir: string, id: string, now: Date = new Date()): Promise<TlsMaterial> {
  const ca = caPaths(dir);
  const node = nodePaths(dir, id);
  const [caPem, certPem, keyPem] = await Promise.all([
    readBounded(ca.caCert, MAX_PEM_BYTES, "CA certificate"),
    readBounded(node.cert, MAX_PEM_BYTES, `certificate of node '${id}'`),
    readBounded(node.key, MAX_PEM_BYTES, `key of node '${id}'`),
  ]);
  const caCert = parseCert(ca.caCert, caPem);
  const cert = parseCert(node.cert, certPem);
  // The CA subject is the source of truth, so a node needs only ca.crt and its own pair;
  // cluster.json (next to the CA key) is the fallback.
  const ou = /(?:^|\n)OU=([^\n]*)/.exec(caCert.subject)?.[1];
  const clusterId = isNodeId(ou) ? ou : await readClusterId(dir);
  const certId = peerIdFromX509(cert);
  if (certId !== id) {
    throw new CertError(`${node.cert} names node '${certId ?? "(none)"}', not '${id}'`);
  }
  if (!cert.checkIssued(caCert) || !cert.verify(caCert.publicKey)) {
    throw new CertError(`${node.cert} was not issued by the cluster CA in ${ca.caCert}`);
  }
  try {
    if (!cert.checkPrivateKey(createPrivateKey(keyPem))) {
      throw new CertError(`${node.key} does not match ${node.cert}`);
    }
  } catch (err) {
    if (err instanceof CertError) throw err;
    throw new CertError(`cannot read private key ${node.key}: ${(err as Error).message}`);
  }
  for (const [what, c] of [
    ["CA certificate", caCert],
    [`certificate of node '${id}'`, cert],
  ] as const) {
    // Not yet valid is nearly always a clock: this machine's behind, or the issuing machine's ahead.
    if (now < new Date(c.validFrom))
      throw new CertError(
        `${what} is not valid yet (valid from ${c.validFrom}; this machine's clock reads ` +
          `${now.toUTCString()}): set this machine's clock (NTP), or the issuing machine's, and reissue`,
      );
    if (now > new Date(c.validTo)) {
      throw new CertError(
        `${what} has expired (valid ${c.validFrom} to ${c.validTo}): renew it ` +
          "(docs/deploy.md, Renewing certificates)",
      );
    }
  }
  const warnings: string[] = [];
  const notAfterMs = { ca: new Date(caCert.validTo).getTime(), node: new Date(cert.validTo).getTime() };
  // Certificates are read at start only, and an expired one splits the mesh without a word from the
  // peers (their handshakes fail): say it while there is time to renew.
  for (const [what, c, notAfter, renew] of [
    // The same id: a new CA of a new (random) id would also rename the cluster.
    [
      "CA certificate",
      caCert,
      notAfterMs.ca,
      `certs init --force --cluster-id ${clusterId}, certs issue --force for every node, restart all`,
    ],
    [
      `certificate of node '${id}'`,
      cert,
      notAfterMs.node,
      `certs issue --id ${id} --force, then restart this node`,
    ],
  ] as const) {
    const daysLeft = Math.floor((notAfter - now.getTime()) / 86_400_000);
    if (daysLeft < EXPIRY_WARN_DAYS)
      warnings.push(`${what} expires in ${daysLeft} days (${c.validTo}); renew it: prefixmesh ${renew}`);
  }
  const mode = (await stat(node.key)).mode & 0o777;
  if (mode & 0o077)
    warnings.push(`${node.key} is readable by others (mode ${mode.toString(8)}); chmod 600 it`);
  return { id, clusterId, ca: caPem, cert: certPem, key: keyPem, warnings, notAfterMs };
}

/** One PEM certificate, or a CertError naming its file (a node reads three; say which one is wrong). */
function parseCert(path: string, pem: string): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch (err) {
    throw new CertError(`${path} is no PEM certificate: ${(err as Error).message}`);
  }
}

/** Options for the peer server (fastify `https:` or https.createServer): only cluster-CA client certs. */
export function serverTlsOptions(m: TlsMaterial) {
  return {
    ca: m.ca,
    cert: m.cert,
    key: m.key,
    requestCert: true,
    rejectUnauthorized: true,
    minVersion: "TLSv1.3" as const,
  };
}

/**
 * Options for a peer client (undici `new Pool(url, { connect: clientTlsOptions(m, "B") })` or
 * tls.connect). The server must present a cluster-CA certificate naming `expectedPeerId`; the host
 * name is not checked, because peers are identified by id (DNS-found peers are plain addresses).
 * With `expectedPeerId` undefined any cluster member is accepted: use that only for the first
 * `GET /peer/hello` to a DNS-found address, then pin later connections to the id it announced.
 */
export function clientTlsOptions(m: TlsMaterial, expectedPeerId: string | undefined) {
  return {
    ca: m.ca,
    cert: m.cert,
    key: m.key,
    rejectUnauthorized: true,
    minVersion: "TLSv1.3" as const,
    checkServerIdentity: (_host: string, cert: PeerCertificate): Error | undefined => {
      const id = peerIdFromCert(cert);
      if (id === undefined) return new Error("peer certificate carries no prefixmesh node id");
      if (expectedPeerId !== undefined && id !== expectedPeerId) {
        return new Error(`peer certificate names node '${id}', expected '${expectedPeerId}'`);
      }
      return undefined;
    },
  };
}

/**
 * The node id a certificate names: its single prefixmesh://node/<id> SAN URI, which must agree with the
 * CN when a CN is present. Undefined for anything else (no id, several ids, disagreement).
 */
export function peerIdFromCert(
  cert: Pick<PeerCertificate, "subject" | "subjectaltname">,
): string | undefined {
  const fromSan = idFromSanString(cert.subjectaltname);
  if (fromSan === undefined) return undefined;
  const cn = cert.subject?.CN;
  if (cn !== undefined && cn !== fromSan) return undefined;
  return fromSan;
}

function peerIdFromX509(cert: X509Certificate): string | undefined {
  const fromSan = idFromSanString(cert.subjectAltName);
  if (fromSan === undefined) return undefined;
  const cn = /(?:^|\n)CN=([^\n]*)/.exec(cert.subject)?.[1];
  return cn === undefined || cn === fromSan ? fromSan : undefined;
}

/** Node escapes SAN values with special characters in quotes; our ids never need that, so those never match. */
function idFromSanString(san: string | undefined): string | undefined {
  if (!san) return undefined;
  const ids = san
    .split(", ")
    .filter((e) => e.startsWith(`URI:${NODE_URI_PREFIX}`))
    .map((e) => e.slice(`URI:${NODE_URI_PREFIX}`.length));
  if (ids.length !== 1) return undefined;
  const id = ids[0];
  return isNodeId(id) ? id : undefined;
}

/**
 * The authenticated node id of a peer connection (fastify: `request.raw.socket`), or undefined when the
 * connection is not TLS or the client certificate was not verified against the cluster CA.
 */
export function peerIdFromTlsSocket(socket: Socket | TLSSocket | undefined | null): string | undefined {
  if (!socket || !("getPeerCertificate" in socket) || typeof socket.getPeerCertificate !== "function") {
    return undefined;
  }
  if (!socket.authorized) return undefined;
  const cert = socket.getPeerCertificate();
  if (!cert || Object.keys(cert).length === 0) return undefined;
  return peerIdFromCert(cert);
}
