/**
 * Whether a failed hello refuses its peer: shared by SWIM's member verification (mesh-verify.ts) and
 * the full mesh's static peer checks (static-peer-checks.ts), so both take the same answers as verdicts.
 */
import { TransportError } from "../../net/transport-client.js";

/** Tries a refusal without a valid response MAC is retried before it is taken as the node's. */
export const UNAUTHENTICATED_TRIES = 4;

/**
 * Whether a verification that failed with `err` after `attempts` earlier tries refuses the candidate
 * now. A refusal is remembered (SWIM's candidates ask again only after a backoff), and in shared-secret mode
 * one without a valid response MAC may be an on-path party's, not the node's: it is taken only when every one
 * of UNAUTHENTICATED_TRIES tries, over a few seconds of backoff, said it (a node holding another secret says
 * so at each), so one forged answer cannot shut a member out for good.
 */
export function refusedNow(err: unknown, attempts: number): boolean {
  if (!definiteRefusal(err)) return false;
  return !(err as TransportError).unauthenticated || attempts + 1 >= UNAUTHENTICATED_TRIES;
}

/**
 * Whether a failed hello proves the far node lacks our cluster's credential: it refused ours (401,
 * 403), answered without a valid proof, or presented a certificate the cluster CA did not issue for
 * that id. Anything else (refused connection, timeout) may pass: retried.
 */
export function definiteRefusal(err: unknown): boolean {
  if (!(err instanceof TransportError)) return false;
  if (err.kind === "http") return err.status === 401 || err.status === 403;
  if (err.kind === "protocol") return true;
  // No peer port there (wrong-port.ts, e.g. a web server's certificate): the address, not a credential.
  if (err.wrongAddress) return false;
  return /certificate|CERT_|ALTNAME|UNKNOWN_CA|self.signed/i.test(err.message);
}
