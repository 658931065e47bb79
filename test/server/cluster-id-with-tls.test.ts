/**
 * --cluster-id names the cluster in shared-secret and insecure modes only; with mutual TLS the CA
 * names it. A different --cluster-id given with --tls-dir is said at start, not taken in silence as
 * if it kept two clusters apart.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

describe("--cluster-id with --tls-dir", () => {
  it("warns that the CA's cluster id is the one used, and says nothing when they agree", async () => {
    const tlsDir = mkdtempSync(join(tmpdir(), "pm-cluster-id-tls-"));
    await initCa(tlsDir, { clusterId: "from-ca" });
    await issueNodeCert(tlsDir, "A");
    for (const clusterId of ["prod", "from-ca"]) {
      const lines: Record<string, unknown>[] = [];
      const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
      const s = resolveNodeSettings(
        { id: "A", engine: "sim", listen: "127.0.0.1:0", peerListen: "127.0.0.1:0", tlsDir, clusterId },
        {},
      );
      const node = await startNode(s, { logger });
      try {
        const said = lines.filter((l) => /--cluster-id is not used with --tls-dir/.test(String(l.msg)));
        if (clusterId === "prod") {
          expect(said).toHaveLength(1);
          expect(said[0]).toMatchObject({ clusterId: "prod", caCluster: "from-ca" });
        } else expect(said).toEqual([]);
      } finally {
        await node.stop();
      }
    }
  }, 60_000);
});
