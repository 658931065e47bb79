/**
 * A node reads its certificates at start only, so /metrics carries the time left on the CA's and its
 * own certificate (computed at each scrape), and only when it runs with --tls-dir.
 */
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { caPaths, initCa, issueNodeCert, nodePaths } from "../../src/net/auth/ca.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

const GAUGE = "prefixmesh_tls_certificate_expiry_seconds";

/** The gauge's value for `certificate`, or undefined when the series is absent. */
function gauge(text: string, certificate: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${GAUGE}{certificate="${certificate}"`));
  return line === undefined ? undefined : Number(line.split(" ").at(-1));
}

const secondsLeft = (pemPath: string) =>
  (new Date(new X509Certificate(readFileSync(pemPath)).validTo).getTime() - Date.now()) / 1000;

describe("the certificate expiry gauge", () => {
  it("reports the seconds left on the CA and node certificates of a --tls-dir node", async () => {
    const tlsDir = mkdtempSync(join(tmpdir(), "pm-tls-expiry-"));
    // Not the defaults, so a gauge reading the wrong certificate (or a constant) is told apart.
    await initCa(tlsDir, { clusterId: "expiry", days: 400 });
    await issueNodeCert(tlsDir, "A", { days: 20 });
    const s = resolveNodeSettings(
      { id: "A", engine: "sim", listen: "127.0.0.1:0", peerListen: "127.0.0.1:0", tlsDir },
      {},
    );
    const node = await startNode(s, { logger: pino({ level: "silent" }) });
    try {
      const text = await (await fetch(`${node.apiUrl}/metrics`)).text();
      const ca = gauge(text, "ca");
      const own = gauge(text, "node");
      expect(ca).toBeDefined();
      expect(own).toBeDefined();
      expect(Math.abs((ca as number) - secondsLeft(caPaths(tlsDir).caCert))).toBeLessThan(5);
      expect(Math.abs((own as number) - secondsLeft(nodePaths(tlsDir, "A").cert))).toBeLessThan(5);
      expect(own as number).toBeGreaterThan(19 * 86_400);
      expect(own as number).toBeLessThan(21 * 86_400);
      expect(ca as number).toBeGreaterThan(399 * 86_400);
    } finally {
      await node.stop();
    }
  }, 60_000);

  it("is absent from a node without --tls-dir", async () => {
    const s = resolveNodeSettings({ id: "A", engine: "sim", listen: "127.0.0.1:0", insecure: true }, {});
    const node = await startNode(s, { logger: pino({ level: "silent" }) });
    try {
      const text = await (await fetch(`${node.apiUrl}/metrics`)).text();
      expect(text).toContain("prefixmesh_tree_tokens");
      expect(text).not.toContain(GAUGE);
    } finally {
      await node.stop();
    }
  }, 60_000);
});
