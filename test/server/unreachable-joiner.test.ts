/**
 * A joining node that advertises a peer address its seed cannot reach (a container's own address,
 * a wrong --advertise) is never admitted; the seed says so at warn, naming the address, instead of
 * only failing its answers at debug level once a second for as long as the joiner runs.
 */

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { waitFor } from "../e2e/helpers.js";

const settings = (o: Record<string, unknown>) =>
  resolveNodeSettings(
    { engine: "sim", logLevel: "silent", listen: "127.0.0.1:0", peerListen: "127.0.0.1:0", ...o },
    {},
  );

describe("a joiner unreachable at the address it advertises", () => {
  it("is named by the seed at warn, with the address, after its failures last", async () => {
    const tlsDir = mkdtempSync(join(tmpdir(), "pm-unreachable-joiner-"));
    await initCa(tlsDir, { clusterId: "unreachable" });
    for (const id of ["X", "Y"]) await issueNodeCert(tlsDir, id);
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const x = await startNode(settings({ id: "X", tlsDir }), { logger });
    const nowhere = `127.0.0.1:${await freePort("127.0.0.1")}`;
    const y = await startNode(
      settings({ id: "Y", tlsDir, advertise: nowhere, join: new URL(x.peerUrl).host }),
      { logger: pino({ level: "silent" }) },
    );
    try {
      const said = () => lines.filter((l) => /joining node unreachable/.test(String(l.msg)));
      await waitFor(() => said().length > 0, 30_000, "the seed to say its joiner is unreachable");
      expect(said()[0]).toMatchObject({ peer: "Y", url: `https://${nowhere}`, level: 40 });
      expect(String(said()[0]?.msg)).toMatch(/--advertise/);
      expect(Number(said()[0]?.failingS)).toBeGreaterThanOrEqual(10);
    } finally {
      await Promise.all([y.stop(), x.stop()]);
    }
  }, 60_000);
});
