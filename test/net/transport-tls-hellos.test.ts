/**
 * Which peers a node takes: mutual-TLS authentication by certificate, and the protocol range a
 * peer's hello says, judged in each authentication mode.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { opensslAvailable } from "../../src/net/auth/openssl.js";
import { loadTlsMaterial, type TlsMaterial } from "../../src/net/auth/tls.js";
import { hmacAuth, insecureAuth, mtlsAuth } from "../../src/net/transport-auth.js";
import { TransportError } from "../../src/net/transport-client.js";
import { fwd, SECRET, snapshotMsg } from "./fixtures.js";
import { laterDouble, peerHarness, protocol2Double } from "./transport-fixtures.js";

const { start, client, judgeHello } = peerHarness();

const haveOpenssl = await opensslAvailable();
if (!haveOpenssl) console.log("skipped mutual-TLS transport tests: openssl not installed");
describe.skipIf(!haveOpenssl)("peer transport (mutual TLS)", () => {
  const dir = mkdtempSync(join(tmpdir(), "pm-tls-"));
  let a: TlsMaterial;
  let b: TlsMaterial;
  beforeAll(async () => {
    await initCa(dir, { clusterId: "c1" });
    await issueNodeCert(dir, "A");
    await issueNodeCert(dir, "B");
    [a, b] = await Promise.all([loadTlsMaterial(dir, "A"), loadTlsMaterial(dir, "B")]);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("takes a later peer that still speaks our protocol; refuses a protocol 2 one, saying why", async () => {
    expect(await judgeHello(mtlsAuth(b), mtlsAuth(a), laterDouble)).toMatchObject({ ok: true });
    expect(await judgeHello(mtlsAuth(b), mtlsAuth(a), protocol2Double)).toEqual({
      ok: false,
      reason: "wrong-protocol",
      message:
        "peer 'B' speaks protocols 2..2, this node accepts 3..3 (below 3, one version number covered several wire forms): upgrade the peer",
    });
  });

  it("authenticates peers by certificate and refuses a pinned id mismatch", async () => {
    const { url, log, wire } = await start(mtlsAuth(b));
    expect(url.startsWith("https://")).toBe(true);
    const c = client(mtlsAuth(a), {}, "http");
    c.setPeer("B", url);
    const reply = await c.forward("B", fwd("A-1"), () => {});
    expect(reply.type).toBe("result");
    expect(wire.httpForwards).toBe(1);
    expect(log.forwards.map((f) => f.reqId)).toEqual(["A-1"]);
    await c.send("B", snapshotMsg([7]));
    expect(log.snapshots[0]?.from).toBe("A");
    // Pinned to the wrong id: the client refuses B's certificate.
    const pinned = client(mtlsAuth(a));
    pinned.setPeer("C", url);
    const err = await pinned.send("C", snapshotMsg([7])).catch((e) => e);
    expect(err).toBeInstanceOf(TransportError);
    // No client certificate at all: refused at the handshake.
    const plain = await fetch(`${url}/peer/hello`).catch((e) => e);
    expect(plain).toBeInstanceOf(Error);
    expect(log.snapshots).toHaveLength(1);
  });
});

describe("which hellos a node takes (insecure, shared secret; mutual TLS above)", () => {
  it("takes a later peer that still speaks our protocol, without --insecure's or the secret's help", async () => {
    expect(await judgeHello(insecureAuth("B"), insecureAuth("A"), laterDouble)).toMatchObject({ ok: true });
    expect(await judgeHello(hmacAuth("B", SECRET), hmacAuth("A", SECRET), laterDouble)).toMatchObject({
      ok: true,
    });
  });

  it("refuses a protocol 2 peer, in shared-secret mode for the response MACs it lacks", async () => {
    expect(await judgeHello(insecureAuth("B"), insecureAuth("A"), protocol2Double)).toMatchObject({
      ok: false,
      reason: "wrong-protocol",
      message: expect.stringMatching(
        /^peer 'B' speaks protocols 2\.\.2, this node accepts 3\.\.3 \(below 3, .*\): upgrade the peer$/,
      ),
    });
    // Sealed, as a real protocol 2 node's hello is not (response-auth.test.ts): it reaches the check.
    expect(await judgeHello(hmacAuth("B", SECRET), hmacAuth("A", SECRET), protocol2Double)).toEqual({
      ok: false,
      reason: "wrong-protocol",
      message:
        "peer 'B' speaks protocols 2..2, this node accepts 3..3 (a shared-secret mesh needs 3 or newer: older nodes' answers carry no response MAC): upgrade the peer",
    });
  });

  it("refuses a later peer that no longer speaks our protocol: this node is the one to upgrade", async () => {
    const newer = () => ({ id: "B", cluster: "c1", model: "m", protocol: 4 });
    const r = await judgeHello(insecureAuth("B"), insecureAuth("A"), newer);
    expect(r).toMatchObject({ ok: false, reason: "wrong-protocol" });
    expect(r.ok || r.message).toBe(
      "peer 'B' speaks protocols 4..4, this node accepts 3..3: this node is too old for the peer, upgrade it",
    );
  });
});
