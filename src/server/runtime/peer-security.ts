/**
 * How a node's peers prove who they are: TLS material or a shared secret loaded, the security mode
 * checked against the peers, seeds and DNS name it was given, and the PeerAuth its requests run under.
 */
import type { Logger } from "pino";
import { loadSecretFile } from "../../net/auth/secret.js";
import { checkSecurityMode, type SecurityMode } from "../../net/auth/security-mode.js";
import { loadTlsMaterial, type TlsMaterial } from "../../net/auth/tls.js";
import { DiscoveryError, type StaticPeer } from "../../net/discovery.js";
import { hmacAuth, insecureAuth, mtlsAuth, type PeerAuth } from "../../net/transport-auth.js";
import type { NodeSettings } from "../settings/index.js";
import { parseJoin } from "./mesh-seeds.js";

export interface PeerSecurity {
  tls: TlsMaterial | undefined;
  /** The `--join` seeds' URLs. */
  join: string[];
  mode: SecurityMode;
  /** A lone scuttlebutt node that can prove no joiner's id, so admits none. */
  admitsNone: boolean;
  auth: PeerAuth;
}

/** Loads the credentials and checks the mode; warns of what runs unauthenticated. */
export async function peerSecurity(
  s: NodeSettings,
  peers: readonly StaticPeer[],
  logger: Logger,
  /** Shared-secret mode: the clock peer requests are signed and checked by (default Date.now). */
  authClock?: () => number,
): Promise<PeerSecurity> {
  let tls: TlsMaterial | undefined;
  if (s.tlsDir) {
    tls = await loadTlsMaterial(s.tlsDir, s.id);
    for (const w of tls.warnings) logger.warn({ warning: w }, "TLS material");
    // The CA names the cluster: another name here would look like a separation that does not hold.
    if (s.clusterId !== undefined && s.clusterId !== tls.clusterId)
      logger.warn(
        { clusterId: s.clusterId, caCluster: tls.clusterId },
        `--cluster-id is not used with --tls-dir: the cluster is the CA's, '${tls.clusterId}'`,
      );
  }
  const secret = s.secretFile ? await loadSecretFile(s.secretFile) : undefined;
  const join = parseJoin(s.join, tls ? "https" : "http");
  if (join.length > 0 && s.gossip !== "scuttlebutt")
    throw new DiscoveryError("--join needs --gossip scuttlebutt (the full mesh is told every member)");
  const mode = checkSecurityMode({
    peers,
    peersDns: s.peersDns,
    join,
    tls,
    secret,
    insecure: s.insecure,
  });
  // A lone scuttlebutt node without credentials: nothing could prove a joiner's id, so none is admitted
  // (unless --insecure: then, as a seed, it admits anyone, like the cluster it is the seed of).
  const admitsNone = mode === "single-node" && s.gossip === "scuttlebutt" && !s.insecure;
  if (mode === "single-node" && s.gossip === "scuttlebutt" && s.insecure)
    logger.warn({}, "peer traffic is NOT authenticated (--insecure)");
  if (admitsNone)
    logger.warn(
      {},
      "no peer authentication: this node runs alone and admits no member (--tls-dir or --secret-file to let nodes join)",
    );
  let auth: PeerAuth;
  if (tls) auth = mtlsAuth(tls);
  else if (secret) auth = hmacAuth(s.id, secret, authClock);
  else auth = insecureAuth(s.id);
  if (mode === "insecure") logger.warn({}, "peer traffic is NOT authenticated (--insecure)");
  return { tls, join, mode, admitsNone, auth };
}
