/**
 * The time left on the node's mTLS certificates (only with --tls-dir; metrics.ts registers it). They are
 * read at start only and warned of there, so a node running for months would otherwise say nothing
 * before its certificate or the cluster CA ends and its peers' handshakes fail.
 */
import { Gauge, type Registry } from "prom-client";

/** The notAfter of the CA's and this node's certificate, epoch ms, as loaded at start. */
export interface CertNotAfter {
  ca: number;
  node: number;
}

/** Computed at each scrape from the notAfter loaded, so no timer runs. */
export function tlsExpiryMetrics(registers: Registry[], notAfter: CertNotAfter): void {
  new Gauge({
    name: "prefixmesh_tls_certificate_expiry_seconds",
    help:
      "Seconds until a certificate this node loaded from --tls-dir ends (negative once past; only with " +
      "--tls-dir), by certificate: ca (the cluster CA), node (this node's own). Certificates are read at " +
      "start: renew and restart before this reaches 0 (docs/deploy.md, Renewing certificates)",
    labelNames: ["certificate"],
    registers,
    collect() {
      const t = Date.now();
      this.set({ certificate: "ca" }, (notAfter.ca - t) / 1000);
      this.set({ certificate: "node" }, (notAfter.node - t) / 1000);
    },
  });
}
