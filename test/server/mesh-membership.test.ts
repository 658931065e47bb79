/**
 * gossip scuttlebutt in the daemon (in-process nodes on loopback, shared-secret mode): members join
 * through a seed, only nodes holding the cluster's secret are ever admitted whatever a relay says, and
 * a node stopping says goodbye so the others drop it at once (still shown, as down, while remembered).
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { connect, createServer as createTcpServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { opensslAvailable } from "../../src/net/auth/openssl.js";
import { TransportError } from "../../src/net/transport-client.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { definiteRefusal, refusedNow, UNAUTHENTICATED_TRIES } from "../../src/server/runtime/peer-refusal.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { relaySays } from "./mesh-relay.js";

const dir = mkdtempSync(join(tmpdir(), "pm-mesh-"));
const secretA = randomBytes(32);
const secretFile = join(dir, "cluster.secret");
const otherSecretFile = join(dir, "other.secret");
writeFileSync(secretFile, secretA.toString("hex"));
writeFileSync(otherSecretFile, randomBytes(32).toString("hex"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const nodes: NodeHandle[] = [];
let fake: Server | undefined;
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
  await new Promise((r) => (fake ? fake.close(r) : r(undefined)));
  fake = undefined;
});

async function start(
  id: string,
  o: {
    join?: string;
    secret?: string;
    tlsDir?: string;
    peer?: number;
    advertise?: string;
    gossip?: "full" | "scuttlebutt";
    /** Receives the node's warnings (its log otherwise stays silent). */
    warn?: (line: string) => void;
  } = {},
): Promise<NodeHandle> {
  const [api, peer] = await Promise.all([freePort("127.0.0.1"), o.peer ?? freePort("127.0.0.1")]);
  const s = resolveNodeSettings(
    {
      id,
      engine: "sim",
      simTimeScale: "0.02",
      pollMs: "100",
      gossip: o.gossip ?? "scuttlebutt",
      ...(o.tlsDir ? { tlsDir: o.tlsDir } : { secretFile: o.secret ?? secretFile }),
      logLevel: "silent",
      listen: `127.0.0.1:${api}`,
      peerListen: `127.0.0.1:${peer}`,
      ...(o.join ? { join: o.join } : {}),
      ...(o.advertise ? { advertise: o.advertise } : {}),
    },
    {},
  );
  const warn = o.warn;
  const logger = warn
    ? pino({ level: "warn" }, { write: (line: string) => warn(line) })
    : pino({ level: "silent" });
  const n = await startNode(s, { logger });
  nodes.push(n);
  return n;
}

interface View {
  peers: { id: string; liveness: string; estimateTokens?: number; goneForMs?: number; gone?: string }[];
  members: { id: string; status: string }[];
}
const view = (n: NodeHandle) => n.runtime.clusterView() as unknown as View;
const hostPort = (n: NodeHandle) => n.peerUrl.replace(/^https?:\/\//, "");

async function until(what: string, cond: () => boolean, ms = 10_000): Promise<void> {
  for (const t0 = Date.now(); !cond(); ) {
    if (Date.now() - t0 > ms) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const meshRejections = async (n: NodeHandle) => {
  const text = await (await fetch(`${n.apiUrl}/metrics`)).text();
  const m = /prefixmesh_peer_auth_rejected_total\{[^}]*reason="mesh-verify"[^}]*\} (\d+)/.exec(text);
  return Number(m?.[1] ?? 0);
};

describe("gossip scuttlebutt: membership by verified contact", () => {
  it("a seed whose name does not resolve: the node starts, serves alone, says so, and keeps trying", async () => {
    const lines: string[] = [];
    // .invalid never resolves (RFC 6761): a peer's DNS name that does not exist yet.
    const a = await start("A", { join: "seed.invalid:9080", warn: (l) => void lines.push(l) });
    const model = ((await (await fetch(`${a.apiUrl}/v1/models`)).json()) as { data: { id: string }[] })
      .data[0]?.id;
    const r = await fetch(`${a.apiUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt: "alone for now", max_tokens: 2 }),
    });
    expect(r.status).toBe(200);
    await until(
      "the unresolved seed in the log",
      () => lines.some((l) => l.includes("does not resolve")),
      20_000,
    );
    const said = JSON.parse(lines.find((l) => l.includes("does not resolve")) as string) as { seed: string };
    expect(said.seed).toBe("http://seed.invalid:9080");
    expect((await fetch(`${a.apiUrl}/health`)).status).toBe(200);
    expect(view(a).members).toEqual([]);
  }, 30_000);

  it("joins through a seed, refuses nodes without the secret whatever a relay says, and says goodbye", async () => {
    const a = await start("A");
    const b = await start("B", { join: hostPort(a) });
    await until("A and B list each other live", () => {
      return (
        view(a).peers.some((p) => p.id === "B" && p.liveness === "live") &&
        view(b).peers.some((p) => p.id === "A")
      );
    });

    // An impostor with another secret joins through A: its requests are refused (401), it never joins.
    const m = await start("M", { join: hostPort(a), secret: otherSecretFile });
    // A relay (holding the secret) says M is alive at M's real address: A asks M to prove its id.
    expect(await relaySays(secretA, a, "M", m.peerUrl)).toBe(204);
    for (const t0 = Date.now(); (await meshRejections(a)) < 1; ) {
      if (Date.now() - t0 > 10_000) throw new Error("A never refused M");
      await new Promise((r) => setTimeout(r, 20));
    }
    // A plain server claiming to be "X" (a hello of our cluster and model, but no proof of the secret).
    const xPort = await freePort("127.0.0.1");
    const model = a.runtime.modelId;
    fake = createServer((_req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ id: "X", cluster: "prefixmesh", model, protocol: PROTOCOL_VERSION }));
    });
    await new Promise<void>((r) => fake?.listen(xPort, "127.0.0.1", r));
    expect(await relaySays(secretA, b, "X", `http://127.0.0.1:${xPort}`)).toBe(204);
    for (const t0 = Date.now(); (await meshRejections(b)) < 1; ) {
      if (Date.now() - t0 > 10_000) throw new Error("B never refused X");
      await new Promise((r) => setTimeout(r, 20));
    }
    await new Promise((r) => setTimeout(r, 500));
    for (const n of [a, b]) {
      const ids = view(n).members.map((x) => x.id);
      expect(ids).not.toContain("M");
      expect(ids).not.toContain("X");
      expect(n.runtime.peerHandlers().isKnownPeer("M")).toBe(false);
    }
    expect(view(m).peers).toEqual([]);

    // B stops (the SIGTERM path): its goodbye reaches A, which drops it at once (no suspicion wait).
    const t0 = Date.now();
    await b.stop();
    nodes.splice(nodes.indexOf(b), 1);
    // "left", not "dead": the goodbye removed it, not suspicion (a missed probe, then its timeout).
    await until("A saw B leave", () => view(a).members.find((x) => x.id === "B")?.status === "left", 10_000);
    // No longer a member, but shown while remembered: down, its estimate dropped.
    const gone = view(a).peers.find((p) => p.id === "B");
    expect(gone).toMatchObject({ liveness: "down", estimateTokens: 0, gone: "left" });
    expect(gone?.goneForMs).toBeGreaterThanOrEqual(0);
    // A planned stop: the "peer not live" alert (suspected unless left) must not fire for it.
    const text = await (await fetch(`${a.apiUrl}/metrics`)).text();
    expect(text).toMatch(/prefixmesh_peer_left\{[^}]*peer="B"[^}]*\} 1\n/);
    expect(text).toMatch(/prefixmesh_peer_suspected\{[^}]*peer="B"[^}]*\} 1\n/);
    // Only a guard against a stall (the status above shows the path): generous for a busy machine.
    expect(Date.now() - t0).toBeLessThan(10_000);
  }, 60_000);

  it("never admits a node of the cluster that runs --gossip full, whatever a relay says", async () => {
    const a = await start("A");
    // F holds the secret and serves our model, but its mesh is the full one: it gossips no SWIM.
    const f = await start("F", { gossip: "full" });
    expect(await relaySays(secretA, a, "F", f.peerUrl)).toBe(204);
    for (const t0 = Date.now(); (await meshRejections(a)) < 1; ) {
      if (Date.now() - t0 > 10_000) throw new Error("A never refused F");
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(view(a).members.map((x) => x.id)).not.toContain("F");
    expect(a.runtime.peerHandlers().isKnownPeer("F")).toBe(false);
  }, 60_000);

  it("reaches a member at its --advertise address, not the one it listens on", async () => {
    // B listens on one port and is reachable only through a forwarder on another (a NAT's mapping).
    const [bPeer, natPort] = await Promise.all([freePort("127.0.0.1"), freePort("127.0.0.1")]);
    let forwarded = 0;
    const open = new Set<{ destroy(): void }>();
    const nat = createTcpServer((c) => {
      forwarded++;
      const up = connect(bPeer, "127.0.0.1");
      open.add(c).add(up);
      c.pipe(up).pipe(c);
      const close = () => {
        c.destroy();
        up.destroy();
      };
      c.on("error", close);
      up.on("error", close);
    });
    await new Promise<void>((r) => nat.listen(natPort, "127.0.0.1", r));
    try {
      const a = await start("A");
      const b = await start("B", { join: hostPort(a), peer: bPeer, advertise: `127.0.0.1:${natPort}` });
      await until("A and B list each other live", () => {
        return (
          view(a).peers.some((p) => p.id === "B" && p.liveness === "live") &&
          view(b).peers.some((p) => p.id === "A" && p.liveness === "live")
        );
      });
      expect(a.runtime.mesh?.addresses().B).toBe(`http://127.0.0.1:${natPort}`);
      expect(forwarded).toBeGreaterThan(0);
    } finally {
      for (const c of open) c.destroy();
      await new Promise((r) => nat.close(r));
    }
  }, 60_000);

  it("with mutual TLS: joins through a seed, and a node certified by another CA is never admitted", async (ctx) => {
    if (!(await opensslAvailable()))
      return ctx.skip("openssl is not installed: no certificates to test with");
    const ca = join(dir, "ca");
    const otherCa = join(dir, "other-ca");
    await initCa(ca, { clusterId: "mesh-tls" });
    await initCa(otherCa, { clusterId: "mesh-tls" });
    for (const id of ["A", "B"]) await issueNodeCert(ca, id);
    await issueNodeCert(otherCa, "M");
    const a = await start("A", { tlsDir: ca });
    const b = await start("B", { tlsDir: ca, join: hostPort(a) });
    expect(a.peerUrl).toMatch(/^https:/);
    await until("A and B list each other live", () => {
      return (
        view(a).peers.some((p) => p.id === "B" && p.liveness === "live") &&
        view(b).peers.some((p) => p.id === "A" && p.liveness === "live")
      );
    });
    // Same cluster id, another CA: its join goes nowhere, and A never lists it.
    const warnings: string[] = [];
    const m = await start("M", { tlsDir: otherCa, join: hostPort(a), warn: (l) => warnings.push(l) });
    await until("M said its seed's certificate is foreign", () =>
      warnings.some((l) => l.includes("seed's TLS handshake failed on a certificate")),
    );
    for (const n of [a, b]) expect(view(n).members.map((x) => x.id)).not.toContain("M");
    expect(view(m).members).toEqual([]);
  }, 60_000);

  it("treats only refused credentials, a missing proof or a foreign certificate as a definite refusal", () => {
    expect(definiteRefusal(new TransportError("http", "401", 401))).toBe(true);
    expect(definiteRefusal(new TransportError("protocol", "hello without a valid proof of its id"))).toBe(
      true,
    );
    expect(definiteRefusal(new TransportError("connection", "ERR_TLS_CERT_ALTNAME_INVALID: x"))).toBe(true);
    expect(definiteRefusal(new TransportError("connection", "ECONNREFUSED: x"))).toBe(false);
    expect(definiteRefusal(new TransportError("timeout", "slow"))).toBe(false);
    expect(definiteRefusal(new TransportError("http", "503", 503))).toBe(false);
  });

  it("takes a refusal without a valid response MAC only when every try of a few says it", () => {
    const forged = new TransportError("http", "403", 403, true);
    const tries = Array.from({ length: UNAUTHENTICATED_TRIES }, (_, i) => refusedNow(forged, i));
    expect(tries).toEqual([...Array(UNAUTHENTICATED_TRIES - 1).fill(false), true]);
    expect(refusedNow(new TransportError("http", "403", 403), 0)).toBe(true);
    expect(refusedNow(new TransportError("http", "503", 503, true), 10)).toBe(false);
  });
});
