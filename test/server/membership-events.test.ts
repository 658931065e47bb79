/**
 * The SWIM failure detector's own counts, as an operator reads them: prefixmesh_membership_events_total
 * on /metrics and `membership` on /cluster (in-process nodes on loopback, shared-secret mode), present
 * under gossip scuttlebutt and moving with the mesh, absent under gossip full.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { encodeMesh, MESH_DECODE_LIMITS } from "../../src/net/mesh-wire.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import type { MembershipCounts } from "../../src/server/runtime/cluster-view.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { postMesh, relaySays } from "./mesh-relay.js";

const dir = mkdtempSync(join(tmpdir(), "pm-swimstats-"));
const secret = randomBytes(32);
const secretFile = join(dir, "cluster.secret");
writeFileSync(secretFile, secret.toString("hex"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const nodes: NodeHandle[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});

async function start(id: string, o: { join?: string; gossip?: "full" | "scuttlebutt" } = {}) {
  const [api, peer] = await Promise.all([freePort("127.0.0.1"), freePort("127.0.0.1")]);
  const s = resolveNodeSettings(
    {
      id,
      engine: "sim",
      simTimeScale: "0.02",
      pollMs: "100",
      gossip: o.gossip ?? "scuttlebutt",
      secretFile,
      logLevel: "silent",
      listen: `127.0.0.1:${api}`,
      peerListen: `127.0.0.1:${peer}`,
      ...(o.join ? { join: o.join } : {}),
    },
    {},
  );
  const n = await startNode(s, { logger: pino({ level: "silent" }) });
  nodes.push(n);
  return n;
}

const hostPort = (n: NodeHandle) => n.peerUrl.replace(/^https?:\/\//, "");

interface Cluster {
  peers: { id: string; liveness: string }[];
  membership?: MembershipCounts;
}
const cluster = async (n: NodeHandle) => (await (await fetch(`${n.apiUrl}/cluster`)).json()) as Cluster;

/** Every prefixmesh_membership_events_total series of a scrape, by its `event` label. */
async function events(n: NodeHandle): Promise<Map<string, number>> {
  const text = await (await fetch(`${n.apiUrl}/metrics`)).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(/^prefixmesh_membership_events_total\{([^}]*)\} (\S+)$/gm)) {
    const event = /event="([^"]*)"/.exec(m[1] as string)?.[1];
    if (event !== undefined) out.set(event, Number(m[2]));
  }
  return out;
}

async function until(what: string, cond: () => Promise<boolean>, ms = 20_000): Promise<void> {
  for (const t0 = Date.now(); !(await cond()); ) {
    if (Date.now() - t0 > ms) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const EVENTS = [
  "probe",
  "indirect_probe",
  "suspected",
  "refuted",
  "declared_dead",
  "verified",
  "refused",
  "recheck",
  "recheck_dropped",
  "invalid",
  "unsupported",
  "unknown_sender",
  "implausible_incarnation",
  "candidate_dropped",
  "duplicate_id",
];

describe("SWIM's counts on /metrics and /cluster", () => {
  it("gossip scuttlebutt: every event is a series, and they move as the mesh does", async () => {
    const a = await start("A");
    // Before any member: every event already a series (at 0), so an alert's rate() has a baseline.
    const first = await events(a);
    expect([...first.keys()].sort()).toEqual([...EVENTS].sort());
    expect(first.get("probe")).toBe(0);
    expect(first.get("unsupported")).toBe(0);

    const b = await start("B", { join: hostPort(a) });
    await until("A lists B live", async () =>
      (await cluster(a)).peers.some((p) => p.id === "B" && p.liveness === "live"),
    );
    // A verified B before admitting it, and probes it every probe period from then on.
    await until("A probes B", async () => ((await events(a)).get("probe") ?? 0) > 0);
    const before = await events(a);
    expect(before.get("verified")).toBeGreaterThanOrEqual(1);
    await until(
      "A's probe count grows",
      async () => ((await events(a)).get("probe") ?? 0) > (before.get("probe") ?? 0),
    );

    // A sender that is no member (a relay's signed gossip) is counted: what a forged or stray message shows.
    const relayUrl = `http://127.0.0.1:${await freePort("127.0.0.1")}`;
    expect(await relaySays(secret, a, "Z", relayUrl)).toBe(204);
    await until(
      "A counts the unknown sender",
      async () => ((await events(a)).get("unknown_sender") ?? 0) > (before.get("unknown_sender") ?? 0),
    );

    // /cluster carries the same counts, under the core's names.
    const c = await cluster(a);
    expect(c.membership).toBeDefined();
    expect(Object.keys(c.membership ?? {}).sort()).toEqual(
      [
        "probes",
        "indirectProbes",
        "suspected",
        "refuted",
        "declaredDead",
        "verified",
        "refusedMembers",
        "rechecks",
        "rechecksDropped",
        "invalid",
        "unsupported",
        "unknownSender",
        "implausibleIncarnations",
        "candidatesDropped",
        "duplicateId",
      ].sort(),
    );
    const after = await events(a);
    expect(c.membership?.probes).toBeGreaterThan(before.get("probe") ?? 0);
    expect(c.membership?.probes).toBeLessThanOrEqual(after.get("probe") ?? 0);
    expect(c.membership?.unknownSender).toBeGreaterThan(before.get("unknown_sender") ?? 0);
    expect((await cluster(b)).membership?.verified).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it("counts a member's mesh messages the peer port refuses as invalid, not a stranger's", async () => {
    const a = await start("A");
    const b = await start("B", { join: hostPort(a) });
    await until("A lists B live", async () =>
      (await cluster(a)).peers.some((p) => p.id === "B" && p.liveness === "live"),
    );
    const invalid = async () => (await events(a)).get("invalid") ?? 0;
    const base = await invalid();
    expect((await cluster(a)).membership?.invalid).toBe(base);

    // Garbage: an unknown channel byte; and a well-formed swim gossip one entry over the bound.
    const garbage = Uint8Array.from([7, 0, 1, 2, 3]);
    const updates = Array.from({ length: MESH_DECODE_LIMITS.maxEntries + 1 }, (_, i) => ({
      id: `n${i}`,
      status: "alive" as const,
      incarnation: 0,
    }));
    const oversized = encodeMesh({ channel: "swim", msg: { type: "gossip", updates } }, []);

    // Unauthenticated (no signature, or one made with another secret): refused before the mesh
    // route, counted as an auth rejection, never as a member's invalid gossip.
    expect(await postMesh(undefined, a, "B", garbage)).toBe(401);
    expect(await postMesh(randomBytes(32), a, "B", garbage)).toBe(401);
    expect(await invalid()).toBe(base);
    expect((await cluster(a)).membership?.invalid).toBe(base);

    // Authenticated member B: each is a 400, and each counts.
    expect(await postMesh(secret, a, "B", garbage)).toBe(400);
    expect(await postMesh(secret, a, "B", oversized)).toBe(400);
    await until("A counts B's invalid messages", async () => (await invalid()) >= base + 2);
    expect(await invalid()).toBe(base + 2);
    expect((await cluster(a)).membership?.invalid).toBe(base + 2);
    // B speaks this node's protocol: an unknown kind from it is no newer build's, so not `unsupported`.
    expect((await cluster(a)).membership?.unsupported).toBe(0);
    expect((await events(a)).get("unsupported")).toBe(0);
    // The node that sent nothing bad counts nothing.
    expect((await cluster(b)).membership?.invalid).toBe(0);

    // A cache reset starts a new epoch, and SWIM's counts over with it: the refused ones too.
    await a.runtime.resetCache();
    expect((await cluster(a)).membership?.invalid).toBe(0);
    expect(await invalid()).toBe(0);
    expect(await postMesh(secret, a, "B", garbage)).toBe(400);
    expect((await cluster(a)).membership?.invalid).toBe(1);
  }, 60_000);

  it("gossip full: no SWIM, so neither the series nor the object", async () => {
    const f = await start("F", { gossip: "full" });
    const text = await (await fetch(`${f.apiUrl}/metrics`)).text();
    // The family is declared (HELP/TYPE) but holds no series.
    expect(text).toContain("# TYPE prefixmesh_membership_events_total counter");
    expect(text).not.toMatch(/^prefixmesh_membership_events_total\{/m);
    expect(await cluster(f)).not.toHaveProperty("membership");
    expect((await cluster(f)) as unknown).toMatchObject({ gossip: "full" });
  }, 30_000);
});
