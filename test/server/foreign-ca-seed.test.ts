/**
 * A joining node whose --tls-dir holds another cluster CA's ca.crt than its seed's (a CA made twice,
 * two admin machines) says so at its first attempt, in its log and in `/cluster`'s seeds, instead of
 * "seed not answering yet" with OpenSSL's "self-signed certificate in certificate chain".
 */

import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { waitFor } from "../e2e/helpers.js";

type Node = Awaited<ReturnType<typeof startNode>>;

const dir = mkdtempSync(join(tmpdir(), "pm-foreign-ca-"));
const seedDir = join(dir, "seed-ca");
const otherDir = join(dir, "other-ca");
const settings = (o: Record<string, unknown>) =>
  resolveNodeSettings(
    { engine: "sim", logLevel: "silent", listen: "127.0.0.1:0", peerListen: "127.0.0.1:0", ...o },
    {},
  );

describe("a seed whose certificate is from another cluster CA", () => {
  let seed: Node;
  beforeAll(async () => {
    await initCa(seedDir, { clusterId: "one" });
    await issueNodeCert(seedDir, "A");
    await initCa(otherDir, { clusterId: "one" });
    await issueNodeCert(otherDir, "D");
    seed = await startNode(settings({ id: "A", tlsDir: seedDir }), { logger: pino({ level: "silent" }) });
  }, 60_000);
  afterAll(async () => {
    await seed?.stop();
  });

  it("is refused at the first attempt with reason certificate, naming the two ca.crt files", async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const j = await startNode(settings({ id: "D", tlsDir: otherDir, join: new URL(seed.peerUrl).host }), {
      logger,
    });
    try {
      const seedView = async () =>
        ((await (await fetch(`${j.apiUrl}/cluster`)).json()) as { seeds: Record<string, unknown>[] })
          .seeds[0];
      await waitFor(
        async () => (await seedView())?.reason === "certificate",
        20_000,
        "the seed refused on its certificate",
      );
      expect(await seedView()).toMatchObject({ state: "refused", retrying: true });
      expect(String((await seedView())?.error)).toMatch(/different ca\.crt files/);
      const said = lines.filter((l) => /seed's TLS handshake failed on a certificate/.test(String(l.msg)));
      expect(said[0]).toMatchObject({ attempts: 1, level: 50 });
      expect(String(said[0]?.err)).toMatch(/not from this node's cluster CA/);
      expect(lines.some((l) => /not answering/.test(String(l.msg)))).toBe(false);
    } finally {
      await j.stop();
    }
  }, 40_000);
});
