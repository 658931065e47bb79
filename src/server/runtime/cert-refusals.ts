/**
 * Messages to a member whose TLS handshake fails on a certificate (another cluster's CA, one expired
 * or not yet valid). The member is up and waiting will not fix it, while SWIM only sees it go silent
 * and dead: said at warn once a minute per member, whichever sender met it (snapshots: peer-sender.ts,
 * mesh messages: stranger-pools.ts), the rest at debug, so a peer failing twice a second is one line.
 */
import type { TransportError } from "../../net/transport-error.js";
import { explainForeignCert } from "../../net/wrong-port.js";
import type { RuntimeLogger } from "./logger.js";
import { SaidPerKey } from "./said-per-key.js";

export const CERT_REFUSAL_SAY_EVERY_MS = 60_000;

export class CertRefusals {
  private readonly said = new SaidPerKey(CERT_REFUSAL_SAY_EVERY_MS);
  /** Peers whose address is being read for its certificate (one read each, seconds at most). */
  private readonly explaining = new Set<string>();

  constructor(private readonly now: () => number = Date.now) {}

  /** A message to `peer` failed with `err` (a `certRefused` one). */
  failed(logger: RuntimeLogger, peer: string, err: TransportError, what: string): void {
    const now = this.now();
    const fields = { peer, sending: what, err: err.message };
    // Asked before taken: nothing is held back here (the rest go to debug), so past its minute an
    // entry is dropped and departed peers' ids do not pile up.
    if (!this.said.due(peer, now)) {
      logger.debug(fields, "peer TLS handshake failed on a certificate");
      return;
    }
    this.said.take(peer, now);
    logger.warn(
      fields,
      err.wrongAddress
        ? "peer address is no peer port: nothing reaches it until it is a member's --peer-listen " +
            "(said once a minute per peer)"
        : "peer TLS handshake failed on a certificate: nothing reaches it until the certificates agree " +
            "(said once a minute per peer)",
    );
  }

  /**
   * As `failed`, for a message sent to `url`: before the warn line, the certificate there is read, and
   * one that names no prefixmesh node (a web server at a --peers address) is said as the wrong address
   * it is, not another cluster's CA (wrong-port.ts, as for seeds).
   */
  failedAt(
    logger: RuntimeLogger,
    peer: string,
    url: string | undefined,
    err: TransportError,
    what: string,
  ): void {
    const due = this.said.due(peer, this.now());
    if (url === undefined || !due) this.failed(logger, peer, err, what);
    else if (this.explaining.has(peer)) {
      logger.debug({ peer, sending: what, err: err.message }, "peer TLS handshake failed on a certificate");
    } else {
      this.explaining.add(peer);
      void explainForeignCert(url, err)
        .catch(() => err)
        .then((e) => {
          this.explaining.delete(peer);
          this.failed(logger, peer, e, what);
        });
    }
  }

  get size(): number {
    return this.said.size;
  }
}

/** One per node: its senders share its PeerClient, so a peer is said once a minute, not once per sender. */
const byClient = new WeakMap<object, CertRefusals>();

export function certRefusalsOf(client: object, now?: () => number): CertRefusals {
  let c = byClient.get(client);
  if (c === undefined) {
    c = new CertRefusals(now);
    byClient.set(client, c);
  }
  return c;
}
