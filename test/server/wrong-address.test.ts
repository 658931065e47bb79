/**
 * A joining node given an address that is no peer port it can use (a member's API port, a TLS peer
 * port as http://, a plain port as https://) says so plainly in its log and in `/cluster`'s seeds,
 * told from what the address answered.
 */

import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { wrongPortAnswer } from "../../src/net/wrong-port.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { waitFor } from "../e2e/helpers.js";

type Node = Awaited<ReturnType<typeof startNode>>;

const dir = mkdtempSync(join(tmpdir(), "pm-wrong-address-"));
const secretFile = join(dir, "secret");
const tlsDir = join(dir, "certs");
const settings = (o: Record<string, unknown>) =>
  resolveNodeSettings(
    { engine: "sim", logLevel: "silent", listen: "127.0.0.1:0", peerListen: "127.0.0.1:0", ...o },
    {},
  );
const silent = pino({ level: "silent" });

/** A logger keeping every line at `level` and above, parsed. */
function recording(level = "warn"): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  return { logger, lines };
}

const seedOf = async (n: Node): Promise<Record<string, unknown> | undefined> =>
  ((await (await fetch(`${n.apiUrl}/cluster`)).json()) as { seeds: Record<string, unknown>[] }).seeds[0];

describe("wrongPortAnswer", () => {
  const body = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
  it("names an OpenAI-style 404 as an API port, a prefixmesh node's by its route message", () => {
    const api = body({ error: { message: "no route GET /peer/hello", type: "invalid_request_error" } });
    expect(wrongPortAnswer(404, api)).toMatch(
      /a prefixmesh node's API port \(--listen\), not as a peer port/,
    );
    const other = body({ error: { message: "Not found", type: "not_found_error" } });
    expect(wrongPortAnswer(404, other)).toMatch(/an OpenAI-style API .*--peer-listen/);
  });

  it("says any other 404 is no peer port, and leaves other statuses alone", () => {
    expect(wrongPortAnswer(404, body({ detail: "Not Found" }))).toMatch(/no prefixmesh peer port/);
    expect(wrongPortAnswer(404, new TextEncoder().encode("<html>"))).toMatch(/no prefixmesh peer port/);
    // A peer port's own refusals are not a wrong address.
    expect(wrongPortAnswer(401, body({ error: "peer authentication failed: missing" }))).toBeUndefined();
    expect(wrongPortAnswer(503, body({ error: { message: "x", type: "y" } }))).toBeUndefined();
    // A large body is not parsed for its shape.
    const big = body({ error: { message: "x".repeat(10_000), type: "y" } });
    expect(wrongPortAnswer(404, big)).toMatch(/no prefixmesh peer port/);
  });
});

describe("a seed address that is no peer port", () => {
  let plain: Node;
  let tls: Node;
  beforeAll(async () => {
    writeFileSync(secretFile, "ab".repeat(32), { mode: 0o600 });
    await initCa(tlsDir, { clusterId: "wrong-address" });
    for (const id of ["T", "J"]) await issueNodeCert(tlsDir, id);
    plain = await startNode(settings({ id: "P", secretFile }), { logger: silent });
    tls = await startNode(settings({ id: "T", tlsDir }), { logger: silent });
  }, 60_000);
  afterAll(async () => {
    await Promise.all([plain?.stop(), tls?.stop()]);
  });

  /** Starts joiner J with `o`, waits for its seed to be refused as `wrong-port`, returns what it said. */
  async function joinWrong(o: Record<string, unknown>, join: string) {
    const rec = recording();
    const j = await startNode(settings({ id: "J", join, ...o }), { logger: rec.logger });
    try {
      await waitFor(
        async () => (await seedOf(j))?.reason === "wrong-port",
        20_000,
        "the seed refused as wrong-port",
      );
      const said = rec.lines.filter((l) => /seed address is not a peer port/.test(String(l.msg)));
      return { seed: await seedOf(j), said };
    } finally {
      await j.stop();
    }
  }

  it("a member's API port, with a shared secret: says it answers as an API port", async () => {
    const { seed, said } = await joinWrong({ secretFile }, new URL(plain.apiUrl).host);
    expect(seed).toMatchObject({ state: "refused", reason: "wrong-port", retrying: true });
    expect(seed?.error).toMatch(/API port \(--listen\), not as a peer port/);
    // Said at the first attempt, not after the seed has been silent a while.
    expect(said.length).toBeGreaterThanOrEqual(1);
    expect(said[0]).toMatchObject({ attempts: 1 });
    expect(String(said[0]?.err)).toMatch(/--peer-listen/);
  }, 40_000);

  it("a member's API port, without credentials (--insecure): the same", async () => {
    const { seed } = await joinWrong({ insecure: true }, new URL(plain.apiUrl).host);
    expect(seed?.error).toMatch(/API port \(--listen\), not as a peer port/);
  }, 40_000);

  it("a member's API port, with mutual TLS: says it answers without TLS", async () => {
    const { seed, said } = await joinWrong({ tlsDir }, new URL(plain.apiUrl).host);
    expect(seed?.error).toMatch(/answers without TLS: a node's API port/);
    expect(said[0]).toMatchObject({ attempts: 1 });
  }, 40_000);

  it("a TLS peer port as http:// (a shared-secret joiner): says the address speaks TLS", async () => {
    const { seed, said } = await joinWrong({ secretFile }, new URL(tls.peerUrl).host);
    expect(seed?.error).toMatch(/speaks TLS, but its URL is http:\/\//);
    expect(String(said[0]?.err)).toMatch(/--tls-dir/);
  }, 40_000);

  it("a plain peer port as https:// (a TLS joiner): says it answers without TLS", async () => {
    const { seed } = await joinWrong({ tlsDir }, new URL(plain.peerUrl).host);
    expect(seed?.error).toMatch(/answers without TLS/);
  }, 40_000);

  it("a static peer (--gossip full) at a member's API port: one plain line per check", async () => {
    const rec = recording("debug");
    const url = plain.apiUrl;
    const j = await startNode(settings({ id: "J", gossip: "full", secretFile, peers: `P=${url}` }), {
      logger: rec.logger,
    });
    try {
      const said = () =>
        rec.lines.filter((l) => /static peer address is not a peer port/.test(String(l.msg)));
      await waitFor(() => said().length > 0, 20_000, "the static peer's wrong address said");
      expect(String(said()[0]?.err)).toMatch(/API port \(--listen\), not as a peer port/);
      // Its hellos back off as before (1 s, 2 s, …), and the mistake is not said again at each.
      const backoffs = () =>
        rec.lines.filter((l) => l.msg === "static peer hello unanswered: backing off").map((l) => l.retryInS);
      await waitFor(() => backoffs().length >= 3, 20_000, "three hellos unanswered");
      expect(backoffs().slice(0, 3)).toEqual([1, 2, 4]);
      expect(said()).toHaveLength(1);
      // Its snapshots, refused at every round, are said at warn once (a minute), not each time.
      const refused = rec.lines.filter((l) => l.msg === "peer refused message");
      expect(refused.length).toBeGreaterThan(2);
      expect(refused.filter((l) => l.level === 40)).toHaveLength(1);
    } finally {
      await j.stop();
    }
  }, 40_000);
});
