/**
 * Requests to the peer port that fail authentication (a scanner, a node with another secret sending
 * its snapshots) come as fast as their sender likes: the metric counts each one, the log says each
 * reason at warn once a minute, not once per request.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { expect, it } from "vitest";
import { writeSecretFile } from "../../src/net/auth/secret.js";
import { AuthRefusalLog } from "../../src/server/runtime/auth-refusal-log.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { waitFor } from "../e2e/helpers.js";

it("a burst of unsigned peer requests is one warn line, every refusal counted", async () => {
  const dir = mkdtempSync(join(tmpdir(), "pm-auth-log-"));
  const secretFile = join(dir, "secret");
  await writeSecretFile(secretFile);
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  const settings = resolveNodeSettings(
    {
      id: "A",
      engine: "sim",
      listen: "127.0.0.1:0",
      peerListen: "127.0.0.1:0",
      calibrationMs: 0,
      secretFile,
    },
    {},
  );
  const n = await startNode(settings, { logger });
  try {
    const statuses = [];
    for (let i = 0; i < 20; i++) {
      const r = await fetch(`${n.peerUrl}/peer/message`, { method: "POST", body: "x" });
      statuses.push(r.status);
      await r.arrayBuffer();
    }
    expect(new Set(statuses)).toEqual(new Set([401]));
    const counted = async () => {
      const m = await (await fetch(`${n.apiUrl}/metrics`)).text();
      return Number(/prefixmesh_peer_auth_rejected_total\{reason="missing"[^}]*\} (\d+)/.exec(m)?.[1] ?? 0);
    };
    await waitFor(async () => (await counted()) === 20, 10_000, "every refusal counted");
    const said = lines.filter((l) => l.msg === "peer request refused by authentication");
    expect(said).toHaveLength(1);
    expect(said[0]).toMatchObject({ reason: "missing", level: 40 });
  } finally {
    await n.stop();
  }
}, 60_000);

it("says a reason again after a minute, with how many were refused meanwhile", () => {
  let t = 0;
  const warned: Record<string, unknown>[] = [];
  const logger = {
    info() {},
    error() {},
    debug() {},
    warn: (f: Record<string, unknown>) => void warned.push(f),
  };
  const log = new AuthRefusalLog(logger, () => t);
  for (let i = 0; i < 5; i++) log.refused("stale");
  log.refused("bad-signature");
  expect(warned).toEqual([{ reason: "stale" }, { reason: "bad-signature" }]);
  t += 60_000;
  log.refused("stale");
  expect(warned[2]).toEqual({ reason: "stale", refusedSinceLastSaid: 4 });
});
