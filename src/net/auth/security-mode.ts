/**
 * The insecure guard: prompts cross the network between peers, so a multi-node node refuses to start
 * without peer authentication (mutual TLS or a shared secret) unless the operator explicitly asks for
 * an insecure cluster.
 */

export type SecurityMode = "single-node" | "mtls" | "shared-secret" | "insecure";

export class SecurityModeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SecurityModeError";
  }
}

export interface SecurityModeInput {
  /** Statically configured peers (their URLs are checked against the mode). */
  peers: readonly { id: string; url: string }[];
  /** DNS discovery name, when peers come from DNS (counts as a multi-node cluster). */
  peersDns?: string | undefined;
  /** `--join` seed URLs (gossip scuttlebutt; a multi-node cluster too, their scheme checked). */
  join?: readonly string[] | undefined;
  /** Present (truthy) when mutual-TLS material is configured. */
  tls?: unknown;
  /** Present (truthy) when a shared secret is configured. */
  secret?: unknown;
  insecure: boolean;
}

/** Returns the mode the node will run in, or throws SecurityModeError with what to do instead. */
export function checkSecurityMode(input: SecurityModeInput): SecurityMode {
  const hasTls = Boolean(input.tls);
  const hasSecret = Boolean(input.secret);
  // Mutual TLS authenticates peers on its own: a secret beside it would be loaded and never used, so
  // an operator who thinks messages are also signed is told so first, not of URLs wrong for one mode.
  if (hasTls && hasSecret)
    throw new SecurityModeError(
      "--tls-dir and --secret-file were both given: they are two ways to authenticate peers and a node " +
        "uses one (mutual TLS would run and the secret be ignored); pass only one",
    );
  // gossip scuttlebutt: a node with no peers, seeds or DNS name is alone too (a one-node quickstart);
  // it then admits no member (start-node.ts), since it could not check a joiner's credential.
  const multiNode = input.peers.length > 0 || Boolean(input.peersDns) || (input.join?.length ?? 0) > 0;
  for (const p of input.peers) {
    const scheme = safeProtocol(p.url);
    if (hasTls && scheme !== "https:") {
      throw new SecurityModeError(
        `peer ${p.id} has URL ${p.url}; with mutual TLS every peer URL must be https://`,
      );
    }
    if (!hasTls && scheme === "https:") {
      throw new SecurityModeError(
        `peer ${p.id} has an https:// URL but no cluster CA is configured (--tls-dir); use http:// or configure mTLS`,
      );
    }
  }
  if (hasTls) return "mtls";
  if (hasSecret) return "shared-secret";
  if (!multiNode) return "single-node";
  if (input.insecure) return "insecure";
  throw new SecurityModeError(
    "refusing to start a multi-node cluster without peer authentication: prompts would cross the network " +
      "unauthenticated. Use mutual TLS (--tls-dir, see 'prefixmesh certs init'), a shared secret " +
      "(--secret-file, see 'prefixmesh certs secret'), or pass --insecure on a network you fully trust",
  );
}

function safeProtocol(url: string): string | undefined {
  try {
    return new URL(url).protocol;
  } catch {
    return undefined;
  }
}
