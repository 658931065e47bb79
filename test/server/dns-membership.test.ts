/**
 * DnsMembership (peers from DNS kept in step with the node's membership) against fake ports and an
 * injected resolver, and PeerClient.probeHello against a real peer server (HMAC and mTLS).
 */
import { spawnSync } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { opensslAvailable } from "../../src/net/auth/openssl.js";
import { loadTlsMaterial } from "../../src/net/auth/tls.js";
import { DiscoveryError } from "../../src/net/discovery.js";
import { hmacAuth, mtlsAuth, type PeerAuth } from "../../src/net/transport-auth.js";
import { PeerClient } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { fileResolver } from "../../src/server/runtime/dns-membership.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings, SettingsError } from "../../src/server/settings/index.js";
import { requireBuild, waitFor } from "../e2e/helpers.js";
import { snapshotMsg } from "../net/fixtures.js";
import { running, url, withMemberB, world } from "./dns-world.js";

const haveOpenssl = await opensslAvailable();

afterEach(() => {
  for (const d of running.splice(0)) d.stop();
});

describe("DnsMembership", () => {
  it("admits verified addresses, skips itself and strangers, removes what leaves DNS", async () => {
    const w = world();
    running.push(w.dns);
    w.answers.set(url("10.0.0.1"), { id: "A" }); // ourselves
    w.answers.set(url("10.0.0.2"), { id: "B" });
    w.answers.set(url("10.0.0.3"), { id: "C", cluster: "other" });
    w.answers.set(url("10.0.0.4"), { id: "D", model: "other-model" });
    w.answers.set(url("10.0.0.5"), { id: "E", promptText: false });
    w.setRecords(["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"]);
    await w.dns.start();
    await waitFor(() => w.members.size === 2, 5_000, "B and E admitted");
    expect([...w.members.keys()].sort()).toEqual(["B", "E"]);
    // The checked hello reaches the runtime with the admission: E's engine needs no prompt text.
    expect(w.promptText.get("E")).toBe(false);
    expect(w.promptText.get("B")).toBeUndefined();
    const status = Object.fromEntries(w.dns.view().map((v) => [v.url, v.status]));
    expect(status[url("10.0.0.1")]).toBe("self");
    expect(status[url("10.0.0.3")]).toBe("refused");
    expect(status[url("10.0.0.4")]).toBe("refused");

    w.setRecords(["10.0.0.1", "10.0.0.5"]);
    await waitFor(() => !w.members.has("B"), 5_000, "B removed");
    expect([...w.members.keys()]).toEqual(["E"]);
    expect(w.log).toContain("-B");
  });

  it("re-checks each member's whole hello every round: a changed engine updates it, a changed model re-probes", async () => {
    const w = world();
    running.push(w.dns);
    w.answers.set(url("10.0.0.2"), { id: "B", promptText: false });
    w.answers.set(url("10.0.0.3"), { id: "C" });
    w.setRecords(["10.0.0.2", "10.0.0.3"]);
    await w.dns.start();
    await waitFor(() => w.members.size === 2, 5_000, "B and C admitted");
    expect(w.promptText.get("B")).toBe(false);
    // B restarts with an engine that needs the prompt text; C comes back serving another model.
    w.answers.set(url("10.0.0.2"), { id: "B", promptText: true });
    w.answers.set(url("10.0.0.3"), { id: "C", model: "other-model" });
    await waitFor(() => w.promptText.get("B") === true, 5_000, "B's new hello noted");
    // Asked with the entry's own (operator-given) URL: the one a cut-off hello may be TLS-checked at.
    expect(w.hellos).toContainEqual(["B", url("10.0.0.2")]);
    await waitFor(
      () => w.dns.view().find((v) => v.url === url("10.0.0.3"))?.status === "refused",
      5_000,
      "C refused",
    );
  });

  it("a member whose snapshot shows a restart is checked at once, not at the next round", async () => {
    // Rounds an hour apart: only the restart can bring the check.
    const w = await withMemberB({ intervalMs: 3_600_000 });
    const { dns } = w;
    dns.sawEpoch("B", 5);
    dns.sawEpoch("B", 5); // the same life: nothing to check
    expect(w.hellos).toEqual([]);
    // B restarts into another model's config: its next snapshot is of a newer epoch.
    w.answers.set(url("10.0.0.2"), { id: "B", model: "other-model" });
    dns.sawEpoch("B", 6);
    await waitFor(() => !w.members.has("B"), 5_000, "B removed");
    expect(w.hellos).toEqual([["B", url("10.0.0.2")]]);
    expect(dns.view()).toMatchObject([{ url: url("10.0.0.2"), status: "refused" }]);
    // A stranger's epoch changes nothing.
    dns.sawEpoch("Z", 9);
    expect(w.hellos).toHaveLength(1);
  });

  it("a member's restarts asked about while its hello is unanswered make no second hello", async () => {
    const w = await withMemberB({ intervalMs: 3_600_000, holdHellos: true });
    const { dns } = w;
    // Its snapshots say a newer epoch each: the peer controls how many, so one hello at a time.
    for (let epoch = 1; epoch <= 50; epoch++) dns.sawEpoch("B", epoch);
    expect(w.hellos).toEqual([["B", url("10.0.0.2")]]);
  });

  it("a restart told while the member's hello is asked is checked once that one ends, not a round later", async () => {
    const w = await withMemberB({ intervalMs: 3_600_000, holdHellos: true });
    const { dns } = w;
    dns.sawEpoch("B", 1);
    dns.sawEpoch("B", 2);
    expect(w.hellos).toHaveLength(1);
    // B restarts again into another model's config while its first check is held; more news of it
    // meanwhile still makes one check, not one each.
    w.answers.set(url("10.0.0.2"), { id: "B", model: "other-model" });
    dns.sawEpoch("B", 3);
    dns.sawEpoch("B", 4);
    w.releaseHellos();
    await waitFor(() => w.hellos.length === 2, 5_000, "B asked again after its check ended");
    w.releaseHellos();
    await waitFor(() => !w.members.has("B"), 5_000, "B removed");
    expect(w.hellos).toHaveLength(2);
  });

  it("an address back in DNS after it left is checked afresh: one now of another cluster is refused", async () => {
    const w = await withMemberB();
    w.setRecords([]);
    await waitFor(() => !w.members.has("B"), 5_000, "B removed");
    // The same id at the same address, restarted in another cluster's config.
    w.answers.set(url("10.0.0.2"), { id: "B", cluster: "other" });
    w.setRecords(["10.0.0.2"]);
    await waitFor(
      () => w.dns.view().find((v) => v.url === url("10.0.0.2"))?.status === "refused",
      5_000,
      "B refused",
    );
    expect(w.members.has("B")).toBe(false);
    expect(w.log).toEqual(["+B", "-B"]);
  });

  it("retries an address that is not up yet, and keeps a member that merely goes down", async () => {
    const w = world();
    running.push(w.dns);
    w.setRecords(["10.0.0.2"]);
    await w.dns.start();
    await new Promise((r) => setTimeout(r, 250));
    expect(w.members.size).toBe(0);
    w.answers.set(url("10.0.0.2"), { id: "B" });
    await waitFor(() => w.members.has("B"), 5_000, "B admitted once up");
    w.answers.set(url("10.0.0.2"), undefined); // down, still in DNS
    await new Promise((r) => setTimeout(r, 350));
    expect(w.members.has("B")).toBe(true);
    expect(w.log).toEqual(["+B"]);
  });

  it("an address that now answers with another id: the old id is removed, the new one admitted", async () => {
    const w = await withMemberB();
    w.answers.set(url("10.0.0.2"), { id: "B2" });
    await waitFor(() => w.members.has("B2"), 5_000, "B2 admitted");
    expect(w.members.has("B")).toBe(false);
    expect(w.log).toEqual(["+B", "-B", "+B2"]);
  });

  it("holds the announced id against the certificate's (mTLS)", async () => {
    const w = world();
    running.push(w.dns);
    w.answers.set(url("10.0.0.2"), { id: "B", certId: "Mallory" });
    w.setRecords(["10.0.0.2"]);
    await w.dns.start();
    await waitFor(() => w.dns.view()[0]?.status === "refused", 5_000, "refused");
    expect(w.members.size).toBe(0);
  });

  it("static peers win; a second address of a member is a spare it moves to", async () => {
    const w = world({ statics: ["S"] });
    running.push(w.dns);
    w.answers.set(url("10.0.0.2"), { id: "S" });
    w.answers.set(url("10.0.0.3"), { id: "B" });
    w.setRecords(["10.0.0.2", "10.0.0.3"]);
    await w.dns.start();
    await waitFor(() => w.members.has("B"), 5_000, "B admitted");
    expect(w.members.has("S")).toBe(false); // static: not DNS's to add or remove
    // B gains a second address, then loses the first: it moves instead of leaving.
    w.answers.set(url("10.0.0.4"), { id: "B" });
    w.setRecords(["10.0.0.2", "10.0.0.3", "10.0.0.4"]);
    await waitFor(() => w.dns.view().some((v) => v.status === "alias"), 5_000, "alias seen");
    w.setRecords(["10.0.0.2", "10.0.0.4"]);
    await waitFor(() => w.members.get("B") === url("10.0.0.4"), 5_000, "B moved");
    expect(w.log).toEqual(["+B", ">B"]);
  });

  it("refuses beyond the membership bound, and admits once there is room", async () => {
    const w = world({ max: 1 });
    running.push(w.dns);
    w.answers.set(url("10.0.0.2"), { id: "B" });
    w.answers.set(url("10.0.0.3"), { id: "C" });
    w.setRecords(["10.0.0.2", "10.0.0.3"]);
    await w.dns.start();
    await waitFor(() => w.dns.view().some((v) => v.status === "full"), 5_000, "one refused as full");
    expect(w.members.size).toBe(1);
    const first = [...w.members.keys()][0] as string;
    w.setRecords([first === "B" ? "10.0.0.3" : "10.0.0.2"]);
    await waitFor(() => w.members.size === 1 && !w.members.has(first), 5_000, "the other admitted");
  });
});

describe("fileResolver", () => {
  it("answers from the file, re-read each time; validates it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "pm-dnsfile-"));
    try {
      const f = join(dir, "dns.json");
      const resolve = fileResolver(f);
      await writeFile(f, JSON.stringify({ mesh: ["127.0.0.2", "127.0.0.3"] }));
      expect(await resolve("mesh")).toEqual(["127.0.0.2", "127.0.0.3"]);
      expect(await resolve("other")).toEqual([]);
      await writeFile(f, JSON.stringify({ mesh: ["127.0.0.2"] }));
      expect(await resolve("mesh")).toEqual(["127.0.0.2"]);
      await writeFile(f, "{not json");
      await expect(resolve("mesh")).rejects.toThrow(/not valid JSON/);
      await writeFile(f, JSON.stringify({ mesh: "127.0.0.2" }));
      await expect(resolve("mesh")).rejects.toThrow(/lists of addresses/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("PeerClient.probeHello", () => {
  const servers: FastifyInstance[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  async function serve(auth: PeerAuth, id: string): Promise<{ url: string; rejected: string[] }> {
    const rejected: string[] = [];
    const app = buildPeerServer({
      auth,
      handlers: {
        hello: () => ({ id, cluster: "c1", model: "m", protocol: PROTOCOL_VERSION }),
        isKnownPeer: () => false, // nobody is a member yet: only hello may pass
        onForward() {},
        onMessage() {},
        onAuthRejected: (r) => rejected.push(r),
      },
    });
    servers.push(app);
    await app.listen({ host: "127.0.0.1", port: 0 });
    const port = (app.server.address() as AddressInfo).port;
    const scheme = auth.mode === "mtls" ? "https" : "http";
    return { url: `${scheme}://127.0.0.1:${port}`, rejected };
  }

  it("shared secret: a signed hello passes before membership; everything else stays refused", async () => {
    const secret = Buffer.alloc(32, 3);
    const { url: u, rejected } = await serve(hmacAuth("B", secret), "B");
    const client = new PeerClient({ auth: hmacAuth("A", secret) });
    const r = await client.probeHello(u);
    expect(r.hello).toMatchObject({ id: "B", cluster: "c1", model: "m" });
    expect(r.certId).toBeUndefined();
    client.setPeer("B", u);
    await expect(client.send("B", snapshotMsg([1]))).rejects.toMatchObject({ status: 403 });
    const wrong = new PeerClient({ auth: hmacAuth("A", Buffer.alloc(32, 4)) });
    await expect(wrong.probeHello(u)).rejects.toMatchObject({ status: 401 });
    expect(rejected).toEqual(["unknown-peer", "bad-signature"]);
    await client.close();
  });

  describe.skipIf(!haveOpenssl)("mTLS", () => {
    let dir: string;
    afterAll(async () => {
      if (dir) await rm(dir, { recursive: true, force: true });
    });
    it("reports the id in the certificate of the unpinned connection", async () => {
      dir = await mkdtemp(join(tmpdir(), "pm-dnsprobe-"));
      await initCa(dir, { clusterId: "c1" });
      await issueNodeCert(dir, "A");
      await issueNodeCert(dir, "B");
      const [a, b] = await Promise.all([loadTlsMaterial(dir, "A"), loadTlsMaterial(dir, "B")]);
      // B's server announces "Z" in its hello, but its certificate says B: the caller sees both.
      const { url: u } = await serve(mtlsAuth(b), "Z");
      const client = new PeerClient({ auth: mtlsAuth(a) });
      const r = await client.probeHello(u);
      expect(r.certId).toBe("B");
      expect(r.hello).toMatchObject({ id: "Z" });
      await client.close();
    });
  });
});

describe("--peers-dns settings", () => {
  it("validates the DNS options and refuses a bad name before starting anything", async () => {
    const s = resolveNodeSettings({ id: "A", peersDns: "mesh.svc:9080" }, {});
    expect(s.peersDnsIntervalMs).toBe(10_000);
    expect(s.maxPeers).toBe(256);
    expect(() => resolveNodeSettings({ id: "A", peersDnsIntervalMs: "50" }, {})).toThrow(SettingsError);
    expect(() => resolveNodeSettings({ id: "A", maxPeers: "257" }, {})).toThrow(SettingsError);
    const env = { PREFIXMESH_PEERS_DNS: "mesh", PREFIXMESH_PEERS_DNS_FILE: "/tmp/x.json" };
    expect(resolveNodeSettings({ id: "A" }, env)).toMatchObject({
      peersDns: "mesh",
      peersDnsFile: "/tmp/x.json",
    });
    // A bad name is refused with the settings, before anything starts, and so is one the system
    // resolver would read as an address (glibc takes 0x7f000001 for 127.0.0.1), as --join refuses it.
    expect(() => resolveNodeSettings({ id: "A", peersDns: "not a name!" }, {})).toThrow(
      /^--peers-dns: 'not a name!': expected a DNS name/,
    );
    for (const name of ["0x7f000001", "0x7f000001:9080", "1.2.3"])
      expect(() => resolveNodeSettings({ id: "A", peersDns: name }, {}), name).toThrow(
        new RegExp(`^--peers-dns: '${name}': host '[^']+' is not a valid IPv4 address`),
      );
    // startNode still checks it, for settings made without the schema.
    const ok = resolveNodeSettings({ id: "A", peersDns: "mesh", secretFile: "/nonexistent" }, {});
    const bad = { ...ok, peersDns: "0x7f000001" };
    await expect(startNode(bad, { logger: pino({ level: "silent" }) })).rejects.toBeInstanceOf(
      DiscoveryError,
    );
  });

  it("on the command line: a hex address as the name is a message and exit code 2", () => {
    const r = spawnSync(
      process.execPath,
      [requireBuild(), "node", "--id", "A", "--engine", "sim", "--peers-dns", "0x7f000001"],
      { encoding: "utf8", timeout: 60_000, env: { PATH: process.env.PATH ?? "" } },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--peers-dns: '0x7f000001': host '0x7f000001' is not a valid IPv4 address/);
  });
});
