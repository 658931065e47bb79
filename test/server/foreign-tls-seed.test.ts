/**
 * A seed address (--join) or static peer at a TLS service that is no prefixmesh node (a web server
 * on the port given) is said to be no peer port, quoting its certificate, not "another cluster CA's
 * ca.crt": the operator fixes the address, not the CA.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { waitFor } from "../e2e/helpers.js";

const dir = mkdtempSync(join(tmpdir(), "pm-foreign-tls-"));
const settings = (o: Record<string, unknown>) =>
  resolveNodeSettings(
    { engine: "sim", logLevel: "silent", listen: "127.0.0.1:0", peerListen: "127.0.0.1:0", ...o },
    {},
  );

describe("a seed address at a TLS service that is no prefixmesh node", () => {
  let web: Server;
  let address: string;
  beforeAll(async () => {
    await initCa(dir, { clusterId: "one" });
    await issueNodeCert(dir, "D");
    const key = join(dir, "web.key");
    const crt = join(dir, "web.crt");
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        key,
        "-out",
        crt,
        "-days",
        "2",
        "-subj",
        "/O=Example Web/CN=www.example.test",
      ],
      { stdio: "ignore" },
    );
    web = createServer({ key: readFileSync(key), cert: readFileSync(crt) }, (_q, r) => r.end("hello"));
    await new Promise<void>((res) => web.listen(0, "127.0.0.1", res));
    address = `127.0.0.1:${(web.address() as AddressInfo).port}`;
  }, 60_000);
  afterAll(async () => {
    await new Promise((res) => web?.close(res));
  });

  it("is refused as no peer port, quoting the certificate, at the first attempt", async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const j = await startNode(settings({ id: "D", tlsDir: dir, join: address }), { logger });
    try {
      const seedView = async () =>
        ((await (await fetch(`${j.apiUrl}/cluster`)).json()) as { seeds: Record<string, unknown>[] })
          .seeds[0];
      await waitFor(async () => (await seedView())?.state === "refused", 20_000, "the seed refused");
      const seed = await seedView();
      expect(seed).toMatchObject({ reason: "wrong-port", retrying: true });
      expect(String(seed?.error)).toMatch(/no prefixmesh peer port: a TLS service/);
      expect(String(seed?.error)).toMatch(/CN=www\.example\.test/);
      expect(String(seed?.error)).not.toMatch(/ca\.crt/);
      const said = lines.filter((l) => /seed address is not a peer port/.test(String(l.msg)));
      expect(said[0]).toMatchObject({ attempts: 1 });
      expect(lines.some((l) => /different ca\.crt/.test(String(l.err)))).toBe(false);
    } finally {
      await j.stop();
    }
  }, 40_000);

  /** Node D given the web server as its peer W, its warn lines kept. */
  async function nodeWithWebServerPeer(gossip: "full" | "scuttlebutt") {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: "warn" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const j = await startNode(settings({ id: "D", tlsDir: dir, gossip, peers: `W=https://${address}` }), {
      logger,
    });
    return { lines, j };
  }

  it("as a static peer of the full mesh, is said as no peer port", async () => {
    const { lines, j } = await nodeWithWebServerPeer("full");
    try {
      await waitFor(
        () => lines.some((l) => /static peer address is not a peer port/.test(String(l.msg))),
        20_000,
        "the static peer said to be no peer port",
      );
      const said = lines.find((l) => /static peer address is not a peer port/.test(String(l.msg)));
      expect(String(said?.err)).toMatch(/no prefixmesh peer port: a TLS service.*CN=www\.example\.test/);
    } finally {
      await j.stop();
    }
  }, 40_000);

  it("as a --peers entry under scuttlebutt, is said as no peer port, not another CA", async () => {
    const { lines, j } = await nodeWithWebServerPeer("scuttlebutt");
    try {
      await waitFor(
        () => lines.some((l) => /no prefixmesh peer port: a TLS service/.test(String(l.err))),
        20_000,
        "the --peers entry said to be no peer port",
      );
      const said = lines.find((l) => /no prefixmesh peer port/.test(String(l.err)));
      expect(said).toMatchObject({ peer: "W" });
      expect(String(said?.msg)).toMatch(/peer address is no peer port/);
      expect(String(said?.err)).toMatch(/CN=www\.example\.test/);
      expect(lines.some((l) => /different ca\.crt/.test(String(l.err)))).toBe(false);
    } finally {
      await j.stop();
    }
  }, 40_000);
});
