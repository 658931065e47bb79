import { X509Certificate } from "node:crypto";
import { copyFile, mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createServer as createHttpsServer, type Server as HttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, createServer, type Server, type TLSSocket } from "node:tls";
import { Client } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CertError, initCa, issueNodeCert, nodePaths, readClusterId } from "../../src/net/auth/ca.js";
import { OpensslError, opensslAvailable } from "../../src/net/auth/openssl.js";
import {
  clientTlsOptions,
  loadTlsMaterial,
  peerIdFromCert,
  peerIdFromTlsSocket,
  serverTlsOptions,
  type TlsMaterial,
} from "../../src/net/auth/tls.js";

const hasOpenssl = await opensslAvailable();
if (!hasOpenssl) console.warn("skipping mutual-TLS tests: no openssl on PATH");

describe.skipIf(!hasOpenssl)("cluster CA and node certificates", () => {
  let root: string;
  let dir: string; // the cluster
  let otherDir: string; // a stranger's CA, issuing the same ids
  let a: TlsMaterial;
  let b: TlsMaterial;
  let strangerB: TlsMaterial;
  let strangerA: TlsMaterial;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "pm-auth-tls-"));
    dir = join(root, "cluster");
    otherDir = join(root, "other");
    await initCa(dir, { clusterId: "test-cluster" });
    await initCa(otherDir, { clusterId: "other-cluster" });
    await Promise.all([
      issueNodeCert(dir, "A"),
      issueNodeCert(dir, "B", { sans: ["node-b.example", "10.0.0.2"] }),
      issueNodeCert(otherDir, "A"),
      issueNodeCert(otherDir, "B"),
    ]);
    [a, b, strangerA, strangerB] = await Promise.all([
      loadTlsMaterial(dir, "A"),
      loadTlsMaterial(dir, "B"),
      loadTlsMaterial(otherDir, "A"),
      loadTlsMaterial(otherDir, "B"),
    ]);
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it("creates a CA with the cluster id in its subject and keys readable only by the owner", async () => {
    const ca = new X509Certificate(await readFile(join(dir, "ca.crt")));
    expect(ca.ca).toBe(true);
    expect(ca.subject).toContain("OU=test-cluster");
    expect(ca.publicKey.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
    expect((await stat(join(dir, "ca.key"))).mode & 0o777).toBe(0o600);
    expect((await stat(nodePaths(dir, "A").key)).mode & 0o777).toBe(0o600);
    expect(await readClusterId(dir)).toBe("test-cluster");
    expect(a.clusterId).toBe("test-cluster");
    expect(a.warnings).toEqual([]);
  });

  it("issues node certificates naming the node, for both server and client use", async () => {
    const cert = new X509Certificate(b.cert);
    expect(cert.ca).toBe(false);
    expect(cert.subject).toContain("CN=B");
    expect(cert.subjectAltName).toContain("URI:prefixmesh://node/B");
    expect(cert.subjectAltName).toContain("IP Address:127.0.0.1");
    expect(cert.subjectAltName).toContain("DNS:localhost");
    expect(cert.subjectAltName).toContain("DNS:node-b.example");
    expect(cert.subjectAltName).toContain("IP Address:10.0.0.2");
    expect(cert.keyUsage).toEqual(expect.arrayContaining(["1.3.6.1.5.5.7.3.1", "1.3.6.1.5.5.7.3.2"]));
    expect(cert.checkIssued(new X509Certificate(b.ca))).toBe(true);
  });

  it("refuses to overwrite a CA or certificate, bad ids and bad SANs", async () => {
    await expect(initCa(dir)).rejects.toThrow(/already exists/);
    await expect(issueNodeCert(dir, "A")).rejects.toThrow(/already exists/);
    await expect(issueNodeCert(dir, "bad/id")).rejects.toThrow(CertError);
    await expect(issueNodeCert(dir, "C", { sans: ["not a host"] })).rejects.toThrow(/invalid SAN/);
    await expect(issueNodeCert(dir, "C", { sans: ["fe80::1%eth0"] })).rejects.toThrow(/invalid SAN/);
    await expect(issueNodeCert(join(root, "nothing"), "A")).rejects.toThrow(/no cluster CA/);
    await expect(initCa(join(root, "x"), { clusterId: "bad id" })).rejects.toThrow(/invalid cluster id/);
  });

  it("fails clearly when openssl is missing", async () => {
    const err = await initCa(join(root, "no-openssl"), { openssl: "/nonexistent/openssl" }).catch((e) => e);
    expect(err).toBeInstanceOf(OpensslError);
    expect(String(err.message)).toMatch(/openssl not found/);
  });

  it("a node needs only ca.crt and its own certificate and key", async () => {
    const nodeDir = join(root, "node-b-only");
    await mkdir(nodeDir, { mode: 0o700 });
    for (const f of ["ca.crt", "node-B.crt", "node-B.key"]) await copyFile(join(dir, f), join(nodeDir, f));
    const m = await loadTlsMaterial(nodeDir, "B");
    expect(m.clusterId).toBe("test-cluster");
    expect(m.cert).toBe(b.cert);
  });

  it("loadTlsMaterial says a certificate not yet valid is a clock, and an expired one expired", async () => {
    const x = new X509Certificate(a.cert);
    const before = new Date(new Date(x.validFrom).getTime() - 3_600_000);
    await expect(loadTlsMaterial(dir, "A", before)).rejects.toThrow(/not valid yet .*clock reads .*NTP/);
    const after = new Date(new Date(x.validTo).getTime() + 3_600_000);
    await expect(loadTlsMaterial(dir, "A", after)).rejects.toThrow(/certificate of node 'A' has expired/);
  });

  it("loadTlsMaterial warns of a certificate ending within 30 days, saying how to renew it", async () => {
    const validTo = new Date(new X509Certificate(a.cert).validTo).getTime();
    const day = 86_400_000;
    const soon = await loadTlsMaterial(dir, "A", new Date(validTo - 10.5 * day));
    const said = soon.warnings.filter((w) => /expires in/.test(w));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(/certificate of node 'A' expires in 10 days .*certs issue --id A --force/);
    expect(a.warnings.filter((w) => /expires in/.test(w))).toEqual([]);
  });

  it("loadTlsMaterial's warning of a CA ending soon keeps the cluster id in its renewal", async () => {
    const short = join(root, "short-ca");
    await initCa(short, { clusterId: "keep-me", days: 20 });
    await issueNodeCert(short, "A", { days: 10 });
    const said = (await loadTlsMaterial(short, "A")).warnings.filter((w) => /expires in/.test(w));
    expect(said).toHaveLength(2);
    expect(said[0]).toMatch(/^CA certificate expires in 19 days .*certs init --force --cluster-id keep-me,/);
  });

  it("loadTlsMaterial rejects a certificate for another id, another CA or another key", async () => {
    const bad = join(root, "bad");
    await initCa(bad, { clusterId: "bad" });
    await issueNodeCert(bad, "A");
    // node-B.crt that actually names A
    await copyFile(nodePaths(bad, "A").cert, nodePaths(bad, "B").cert);
    await copyFile(nodePaths(bad, "A").key, nodePaths(bad, "B").key);
    await expect(loadTlsMaterial(bad, "B")).rejects.toThrow(/names node 'A', not 'B'/);
    // A's certificate from a stranger's CA
    await copyFile(nodePaths(otherDir, "A").cert, nodePaths(bad, "A").cert);
    await expect(loadTlsMaterial(bad, "A")).rejects.toThrow(/not issued by the cluster CA/);
    // the right certificate with another key
    await issueNodeCert(bad, "A", { force: true });
    await copyFile(nodePaths(otherDir, "A").key, nodePaths(bad, "A").key);
    await expect(loadTlsMaterial(bad, "A")).rejects.toThrow(/does not match/);
    await expect(loadTlsMaterial(bad, "Z")).rejects.toThrow(/not found/);
  });

  it("loadTlsMaterial names the file that is no certificate, of the three a node reads", async () => {
    const nodeDir = join(root, "garbled");
    await mkdir(nodeDir, { mode: 0o700 });
    for (const f of ["ca.crt", "node-B.crt", "node-B.key"]) await copyFile(join(dir, f), join(nodeDir, f));
    await writeFile(join(nodeDir, "node-B.crt"), "not a certificate\n");
    await expect(loadTlsMaterial(nodeDir, "B")).rejects.toThrow(/node-B\.crt is no PEM certificate/);
    await copyFile(join(dir, "node-B.crt"), join(nodeDir, "node-B.crt"));
    await writeFile(join(nodeDir, "ca.crt"), "not a certificate\n");
    await expect(loadTlsMaterial(nodeDir, "B")).rejects.toThrow(/ca\.crt is no PEM certificate/);
  });

  describe("handshake on 127.0.0.1", () => {
    let server: Server;
    let port: number;
    const accepted: string[] = [];
    const clientErrors: string[] = [];

    beforeAll(async () => {
      server = createServer(serverTlsOptions(a), (sock: TLSSocket) => {
        const id = peerIdFromTlsSocket(sock) ?? "none";
        accepted.push(id);
        sock.end(`id:${id}\n`);
      });
      server.on("tlsClientError", (err) => clientErrors.push(err.message));
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      port = (server.address() as AddressInfo).port;
    });
    afterAll(async () => {
      await new Promise((r) => server.close(r));
    });

    /** Connects, reads until close; resolves with what arrived and the error, if any. */
    function dial(opts: Record<string, unknown>): Promise<{ data: string; error?: string }> {
      return new Promise((resolve) => {
        let data = "";
        let error: string | undefined;
        const sock = connect({ host: "127.0.0.1", port, ...opts });
        const timer = setTimeout(() => sock.destroy(new Error("test timeout")), 5000);
        sock.setEncoding("utf8");
        sock.on("data", (d: string) => {
          data += d;
        });
        sock.on("error", (e) => {
          error = e.message;
        });
        sock.on("close", () => {
          clearTimeout(timer);
          resolve({ data, error });
        });
      });
    }

    it("accepts a cluster peer and extracts its id from the client certificate", async () => {
      const r = await dial(clientTlsOptions(b, "A"));
      expect(r.error).toBeUndefined();
      expect(r.data).toBe("id:B\n");
      expect(accepted).toContain("B");
    });

    it("refuses a client certificate from another CA at the handshake", async () => {
      const before = accepted.length;
      const errorsBefore = clientErrors.length;
      const r = await dial({ ...clientTlsOptions(strangerB, undefined), ca: a.ca });
      expect(r.data).toBe("");
      expect(accepted.length).toBe(before);
      expect(clientErrors.length).toBeGreaterThan(errorsBefore);
    });

    it("refuses a client without any certificate", async () => {
      const before = accepted.length;
      const r = await dial({ ca: a.ca, minVersion: "TLSv1.3", checkServerIdentity: () => undefined });
      expect(r.data).toBe("");
      expect(accepted.length).toBe(before);
    });

    it("refuses a server whose certificate names another node than expected", async () => {
      const r = await dial(clientTlsOptions(b, "C"));
      expect(r.data).toBe("");
      expect(r.error).toMatch(/names node 'A', expected 'C'/);
    });

    it("refuses a server certificate from another CA", async () => {
      const evil = createServer(serverTlsOptions(strangerA), (s) => s.end("hi"));
      await new Promise<void>((res) => evil.listen(0, "127.0.0.1", res));
      const evilPort = (evil.address() as AddressInfo).port;
      try {
        const r = await new Promise<string>((resolve) => {
          const s = connect({ host: "127.0.0.1", port: evilPort, ...clientTlsOptions(b, "A") });
          s.on("secureConnect", () => resolve("connected"));
          s.on("error", (e) => resolve(e.message));
        });
        expect(r).not.toBe("connected");
      } finally {
        await new Promise((res) => evil.close(res));
      }
    });

    it("works with fastify-style https options and undici connect options", async () => {
      const https: HttpsServer = createHttpsServer(serverTlsOptions(a), (req, res) => {
        res.end(peerIdFromTlsSocket(req.socket) ?? "none");
      });
      await new Promise<void>((res) => https.listen(0, "127.0.0.1", res));
      const httpsPort = (https.address() as AddressInfo).port;
      const client = new Client(`https://127.0.0.1:${httpsPort}`, { connect: clientTlsOptions(b, "A") });
      try {
        const res = await client.request({ method: "GET", path: "/peer/hello" });
        expect(res.statusCode).toBe(200);
        expect(await res.body.text()).toBe("B");
        const pinnedWrong = new Client(`https://127.0.0.1:${httpsPort}`, {
          connect: clientTlsOptions(b, "Z"),
        });
        await expect(pinnedWrong.request({ method: "GET", path: "/" })).rejects.toThrow(/expected 'Z'/);
        await pinnedWrong.close();
      } finally {
        await client.close();
        await new Promise((res) => https.close(res));
      }
    });
  });
});

describe("peerIdFromCert", () => {
  it("takes the id from the single prefixmesh SAN URI, consistent with the CN", () => {
    const san = "URI:prefixmesh://node/A, DNS:localhost, IP Address:127.0.0.1";
    expect(peerIdFromCert({ subject: { CN: "A" } as never, subjectaltname: san })).toBe("A");
    expect(peerIdFromCert({ subject: { CN: "B" } as never, subjectaltname: san })).toBeUndefined();
    expect(peerIdFromCert({ subject: {} as never, subjectaltname: "DNS:localhost" })).toBeUndefined();
    expect(
      peerIdFromCert({
        subject: {} as never,
        subjectaltname: "URI:prefixmesh://node/A, URI:prefixmesh://node/B",
      }),
    ).toBeUndefined();
    expect(
      peerIdFromCert({ subject: {} as never, subjectaltname: 'URI:"prefixmesh://node/A,x"' }),
    ).toBeUndefined();
  });

  it("returns undefined for a plain socket", () => {
    expect(peerIdFromTlsSocket(undefined)).toBeUndefined();
    expect(peerIdFromTlsSocket({} as never)).toBeUndefined();
  });
});
