/**
 * Refusals are asked again: a node that refused a static peer, a `--join` seed or a SWIM member for
 * its hello (another cluster, another protocol) admits it once it is fixed, without restarting; one
 * that stays wrong is asked at most once per backoff period. Backoffs are shortened through
 * `startNode`'s `recheck` option; every wait is for a condition, with a generous deadline.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { RECHECK_MAX_MS, type RecheckTiming } from "../../src/core/refusals.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { relaySays } from "./mesh-relay.js";
import { nodeWithPeerDouble, type StaticPeerDouble } from "./static-peer-double.js";

const dir = mkdtempSync(join(tmpdir(), "pm-recheck-"));
const secret = randomBytes(32);
const secretFile = join(dir, "cluster.secret");
const otherSecretFile = join(dir, "other.secret");
writeFileSync(secretFile, secret.toString("hex"));
writeFileSync(otherSecretFile, randomBytes(32).toString("hex"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const nodes: NodeHandle[] = [];
const doubles: StaticPeerDouble[] = [];
afterEach(async () => {
  await Promise.all([...nodes.splice(0).map((n) => n.stop()), ...doubles.splice(0).map((d) => d.stop())]);
});

async function until(what: string, cond: () => boolean, ms = 15_000): Promise<void> {
  for (const t0 = Date.now(); !cond(); ) {
    if (Date.now() - t0 > ms) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface Refused {
  id: string;
  reason: string;
  refusals: number;
  recheckInMs: number;
}
interface View {
  peers: { id: string; promptText: boolean; liveness: string }[];
  members?: { id: string; status: string }[];
  refused: Refused[];
  seeds?: { state: string; retrying: boolean; nextAttemptAt: string | null; reason: string | null }[];
}
const view = (n: NodeHandle) => n.runtime.clusterView() as unknown as View;
/** `prefixmesh_refused_members{reason}` as `n`'s /metrics says it (undefined: no such series). */
async function refusedGauge(n: NodeHandle, reason: string): Promise<number | undefined> {
  const text = await (await fetch(`${n.apiUrl}/metrics`)).text();
  const line = text
    .split("\n")
    .find((l) => l.startsWith("prefixmesh_refused_members{") && l.includes(`reason="${reason}"`));
  return line === undefined ? undefined : Number(line.split(" ").at(-1));
}

describe("full mesh: a refused static peer is asked again", () => {
  /** Node A (insecure) with static peer B, a double (static-peer-double.ts), and short backoffs. */
  async function nodeWithPeer(hello: (model: string) => object, recheck: { firstMs: number; maxMs: number }) {
    const d = await nodeWithPeerDouble(hello, recheck);
    doubles.push(d);
    return { n: d.node, hellos: d.hellos };
  }

  it("admits a peer fixed after a wrong-cluster refusal, without a restart", async () => {
    let cluster = "other";
    const { n } = await nodeWithPeer(
      (model) => ({ id: "B", cluster, model, protocol: PROTOCOL_VERSION, promptText: false }),
      { firstMs: 200, maxMs: 400 },
    );
    const known = () => n.runtime.peerHandlers().isKnownPeer("B");
    await until("A refuses B", () => !known());
    const refused = view(n).refused;
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ id: "B", refusals: expect.any(Number) });
    expect(refused[0]?.reason).toMatch(/^wrong-cluster: /);
    expect(refused[0]?.recheckInMs).toBeLessThanOrEqual(400);
    expect(await refusedGauge(n, "wrong-cluster")).toBe(1);
    expect(await refusedGauge(n, "wrong-model")).toBe(0);
    cluster = "prefixmesh";
    await until("A admits B on a re-check", () => known());
    await until("B's hello noted", () => view(n).peers.find((p) => p.id === "B")?.promptText === false);
    expect(view(n).refused).toEqual([]);
    expect(n.runtime.admin.refusal("B")).toBeUndefined();
    expect(await refusedGauge(n, "wrong-cluster")).toBe(0);
  });

  it("asks a peer that stays wrong at most once per backoff period", async () => {
    const period = 300;
    const { n, hellos } = await nodeWithPeer(
      (model) => ({ id: "B", cluster: "prefixmesh", model, protocol: PROTOCOL_VERSION + 7 }),
      { firstMs: period, maxMs: period },
    );
    await until("A asks B four times", () => hellos.length >= 4);
    expect(n.runtime.peerHandlers().isKnownPeer("B")).toBe(false);
    expect(view(n).refused[0]?.reason).toMatch(/^wrong-protocol: /);
    const gaps = hellos.slice(1).map((t, i) => t - (hellos[i] as number));
    // A timer never fires early; a few ms are left for two clocks read at different moments.
    for (const g of gaps) expect(g).toBeGreaterThanOrEqual(period - 5);
  });
});

/** Four free loopback ports: A's API and peer port, then B's. */
async function fourPorts(): Promise<[number, number, number, number]> {
  return (await Promise.all([0, 1, 2, 3].map(() => freePort("127.0.0.1")))) as [
    number,
    number,
    number,
    number,
  ];
}

/**
 * A full-mesh sim node `id` on 127.0.0.1 (ports `api`, `peer`) whose one static peer is `other` at
 * `otherPort`, with short re-checks; `extra` adds settings (cluster, credentials), `opts` startNode's
 * options. Stopped after each test.
 */
async function startStatic(
  [id, api, peer]: [string, number, number],
  [other, otherPort]: [string, number],
  extra: Record<string, unknown>,
  opts: Partial<Parameters<typeof startNode>[1]> = {},
): Promise<NodeHandle> {
  const s = resolveNodeSettings(
    {
      id,
      engine: "sim",
      simTimeScale: "0.02",
      pollMs: "100",
      gossip: "full",
      ...extra,
      logLevel: "silent",
      listen: `127.0.0.1:${api}`,
      peerListen: `127.0.0.1:${peer}`,
      peers: `${other}=http://127.0.0.1:${otherPort}`,
    },
    {},
  );
  const n = await startNode(s, {
    logger: pino({ level: "silent" }),
    recheck: { firstMs: 200, maxMs: 400 },
    ...opts,
  });
  nodes.push(n);
  return n;
}

describe("full mesh: two real nodes", () => {
  it("a peer restarted in the right cluster is admitted and heard from, neither node restarted for it", async () => {
    const [aApi, aPeer, bApi, bPeer] = await fourPorts();
    const a = await startStatic(["A", aApi, aPeer], ["B", bPeer], { insecure: true });
    const b1 = await startStatic(["B", bApi, bPeer], ["A", aPeer], { insecure: true, clusterId: "other" });
    await until("A refuses B", () => view(a).refused.some((r) => r.id === "B"));
    await b1.stop();
    nodes.splice(nodes.indexOf(b1), 1);
    const b2 = await startStatic(["B", bApi, bPeer], ["A", aPeer], { insecure: true });
    const live = (n: NodeHandle, id: string) =>
      view(n).peers.some((p) => p.id === id && p.liveness === "live");
    await until("A and B hear each other", () => live(a, "B") && live(b2, "A"));
    expect(view(a).refused).toEqual([]);
  });
});

describe("full mesh: a static peer refusing our clock", () => {
  it("is refused as clock-skew, its log line naming the skew in skewS", async () => {
    const [aApi, aPeer, bApi, bPeer] = await fourPorts();
    const lines: { msg: string; level: number; reason?: string; skewS?: number }[] = [];
    const a = await startStatic(
      ["A", aApi, aPeer],
      ["B", bPeer],
      { secretFile },
      {
        logger: pino({ level: "debug" }, { write: (l: string) => void lines.push(JSON.parse(l)) }),
      },
    );
    // B's clock is 3 min ahead: it refuses every request A signs.
    await startStatic(
      ["B", bApi, bPeer],
      ["A", aPeer],
      { secretFile },
      { authClock: () => Date.now() + 180_000 },
    );
    await until("A refuses B", () => view(a).refused.some((r) => r.id === "B"), 30_000);
    expect(view(a).refused.find((r) => r.id === "B")?.reason).toMatch(/^clock-skew: /);
    const said = lines.find((l) => /^peer refused: /.test(l.msg));
    expect(said).toMatchObject({ reason: "clock-skew" });
    expect(said?.skewS).toBeLessThanOrEqual(-179);
  });
});

describe("gossip scuttlebutt: refused members and seeds are asked again", () => {
  async function start(
    id: string,
    o: {
      peer?: number;
      cluster?: string;
      join?: string;
      secret?: string;
      /** The re-check backoff: short unless the test needs the defaults (30 s first). */
      recheck?: Partial<RecheckTiming>;
      /** The clock its peer requests are signed and checked by (default: the real one). */
      authClock?: () => number;
      logger?: pino.Logger;
      /** More settings (another engine profile, `mixedModels`). */
      settings?: Record<string, unknown>;
    } = {},
  ) {
    const [api, peer] = await Promise.all([freePort("127.0.0.1"), o.peer ?? freePort("127.0.0.1")]);
    const s = resolveNodeSettings(
      {
        id,
        engine: "sim",
        simTimeScale: "0.02",
        pollMs: "100",
        gossip: "scuttlebutt",
        secretFile: o.secret ?? secretFile,
        ...(o.cluster ? { clusterId: o.cluster } : {}),
        logLevel: "silent",
        listen: `127.0.0.1:${api}`,
        peerListen: `127.0.0.1:${peer}`,
        ...(o.join ? { join: o.join } : {}),
        ...o.settings,
      },
      {},
    );
    const n = await startNode(s, {
      logger: o.logger ?? pino({ level: "silent" }),
      recheck: o.recheck ?? { firstMs: 300, maxMs: 600 },
      ...(o.authClock ? { authClock: o.authClock } : {}),
    });
    nodes.push(n);
    return { n, peer };
  }
  const isMember = (n: NodeHandle, id: string) =>
    view(n).members?.some((m) => m.id === id && m.status === "alive") === true;

  it("a member refused for another cluster is admitted once it comes back fixed", async () => {
    const { n: a } = await start("A");
    const { n: b1, peer } = await start("B", { cluster: "other" });
    expect(await relaySays(secret, a, "B", b1.peerUrl)).toBeLessThan(300);
    await until("A refuses B", () => view(a).refused.some((r) => r.id === "B"));
    expect(view(a).refused.find((r) => r.id === "B")?.reason).toMatch(/^wrong-cluster: /);
    expect(isMember(a, "B")).toBe(false);
    // B is fixed: restarted in A's cluster at the same address, joining through A.
    await b1.stop();
    nodes.splice(nodes.indexOf(b1), 1);
    const { n: b2 } = await start("B", { peer, join: a.peerUrl.replace(/^http:\/\//, "") });
    await until("A admits B", () => isMember(a, "B"));
    await until("B admits A", () => isMember(b2, "A"));
    expect(view(a).refused.some((r) => r.id === "B")).toBe(false);
  });

  it("a member restarted fixed is admitted on its new life's incarnation, well before the backoff", async () => {
    // A's first backoff is the ceiling, far beyond this test's deadlines: an admission within them
    // cannot be the backoff running out, however slow the machine.
    const { n: a } = await start("A", { recheck: { firstMs: RECHECK_MAX_MS, maxMs: RECHECK_MAX_MS } });
    const { n: b1, peer } = await start("B", { cluster: "other", recheck: {} });
    // A refuses B's first life under an incarnation at least as high as the one that life started at.
    expect(await relaySays(secret, a, "B", b1.peerUrl, Date.now())).toBeLessThan(300);
    await until("A refuses B", () => view(a).refused.some((r) => r.id === "B"));
    expect(view(a).refused.find((r) => r.id === "B")?.recheckInMs).toBeGreaterThan(RECHECK_MAX_MS / 2);
    await b1.stop();
    nodes.splice(nodes.indexOf(b1), 1);
    const join = a.peerUrl.replace(/^http:\/\//, "");
    const { n: b2 } = await start("B", { peer, join, recheck: {} });
    // Its backoff had not run out: the restart's higher incarnation was the evidence.
    await until("A admits B", () => isMember(a, "B"), 30_000);
    await until("B admits A", () => isMember(b2, "A"));
    expect(view(a).refused.some((r) => r.id === "B")).toBe(false);
  });

  it("a member that left and restarted serving another model is verified again: refused, not taken back", async () => {
    const { n: a } = await start("A");
    const { n: b1, peer } = await start("B");
    expect(await relaySays(secret, a, "B", b1.peerUrl)).toBeLessThan(300);
    await until("A and B are members of each other", () => isMember(a, "B") && isMember(b1, "A"));
    await b1.stop();
    nodes.splice(nodes.indexOf(b1), 1);
    await until("A holds B gone", () => !isMember(a, "B"));
    // The same id at the same address, now another model (its own --mixed-models lets it join A):
    // its restart outranks its previous life, but A must not take its word for what it serves.
    const join = a.peerUrl.replace(/^http:\/\//, "");
    await start("B", { peer, join, settings: { simProfile: "cpu-llamacpp", mixedModels: true } });
    await until("A refuses B's new life", () => view(a).refused.some((r) => r.id === "B"), 30_000);
    expect(view(a).refused.find((r) => r.id === "B")?.reason).toMatch(/^wrong-model: /);
    expect(isMember(a, "B")).toBe(false);
    // Shown as the former member it is, never as a live routing target.
    expect(view(a).peers.find((p) => p.id === "B")?.liveness).not.toBe("live");
  });

  it("a --join seed refused for another cluster is joined once it comes back fixed", async () => {
    const { n: b1, peer } = await start("B", { cluster: "other" });
    const { n: a } = await start("A", { join: `127.0.0.1:${peer}` });
    await until("A refuses its seed", () => view(a).seeds?.[0]?.state === "refused");
    expect(view(a).seeds?.[0]).toMatchObject({ reason: "wrong-cluster", retrying: true });
    expect(view(a).seeds?.[0]?.nextAttemptAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    await b1.stop();
    nodes.splice(nodes.indexOf(b1), 1);
    const { n: b2 } = await start("B", { peer });
    await until("A joins through its seed", () => view(a).seeds?.[0]?.state === "joined");
    await until("A and B are members of each other", () => isMember(a, "B") && isMember(b2, "A"));
  });

  it("a seed refusing our clock is shown as clock-skew, warned of once, counted, and asked again", async () => {
    const { n: b, peer } = await start("B");
    const lines: { msg: string; skewS?: number; level: number }[] = [];
    const logger = pino({ level: "debug" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    // A's clock is 90 s behind: every request it signs is outside B's window.
    const { n: a } = await start("A", {
      join: `127.0.0.1:${peer}`,
      authClock: () => Date.now() - 90_000,
      recheck: { firstMs: 200, maxMs: 60_000 },
      logger,
    });
    const seed = () =>
      view(a).seeds?.[0] as unknown as { state: string; reason: string; error: string; attempts: number };
    await until("A's seed refuses its clock", () => seed()?.reason === "clock-skew");
    expect(seed()).toMatchObject({ state: "refused" });
    expect(seed().error).toMatch(/clock skew: this node's clock is 9\d s behind the peer's/);
    expect(await refusedGauge(a, "clock-skew")).toBe(1);
    expect(await refusedGauge(a, "no-credential")).toBe(0);
    await until("A asks its seed again", () => seed().attempts >= 3);
    const warned = lines.filter((l) => l.level === 40 && /clock is 9\d s behind the seed's/.test(l.msg));
    expect(warned).toHaveLength(1);
    expect(warned[0]?.skewS).toBeLessThanOrEqual(-89);
    expect(isMember(b, "A")).toBe(false);
  });

  it("a member whose clock is off is refused as clock-skew, never as no-credential", async () => {
    const { n: a } = await start("A", { recheck: { firstMs: 200, maxMs: 600_000 } });
    // B's clock is 3 min ahead: it refuses A's signed hello, saying the clock it judged by.
    const { n: b } = await start("B", { authClock: () => Date.now() + 180_000 });
    expect(await relaySays(secret, a, "B", b.peerUrl)).toBeLessThan(300);
    await until("A refuses B", () => view(a).refused.some((r) => r.id === "B"), 30_000);
    const r = view(a).refused.find((x) => x.id === "B");
    expect(r?.reason).toMatch(/^clock-skew: .*this node's clock is 3 min behind the peer's/);
    expect(await refusedGauge(a, "clock-skew")).toBe(1);
    expect(await refusedGauge(a, "no-credential")).toBe(0);
    expect(isMember(a, "B")).toBe(false);
  });

  it("a member whose clock stays off is warned of once, however often it is re-checked", async () => {
    const lines: { msg: string; level: number }[] = [];
    const logger = pino({ level: "debug" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
    const { n: a } = await start("A", { recheck: { firstMs: 200, maxMs: 200 }, logger });
    const { n: b } = await start("B", { authClock: () => Date.now() + 180_000 });
    const refusals = () => view(a).refused.find((x) => x.id === "B")?.refusals ?? 0;
    // Each mention after the backoff re-checks B; each check is refused for its clock again.
    for (const t0 = Date.now(); refusals() < 3; ) {
      if (Date.now() - t0 > 60_000) throw new Error("timed out: A refuses B three times");
      expect(await relaySays(secret, a, "B", b.peerUrl)).toBeLessThan(300);
      await new Promise((r) => setTimeout(r, 100));
    }
    const warned = lines.filter(
      (l) => l.level === 40 && /mesh member refused our signed requests/.test(l.msg),
    );
    expect(warned).toHaveLength(1);
    expect(lines.some((l) => l.level === 20 && /member still refuses our clock/.test(l.msg))).toBe(true);
  });

  it("a node without the cluster's secret is re-checked afresh and never admitted, whatever a relay says", async () => {
    const { n: a } = await start("A");
    const { n: e } = await start("E", { secret: otherSecretFile });
    const refusals = () => view(a).refused.find((r) => r.id === "E")?.refusals ?? 0;
    // A relay keeps saying E is alive: each saying past E's backoff starts a fresh check, which fails.
    for (const t0 = Date.now(); refusals() < 2; ) {
      if (Date.now() - t0 > 30_000) throw new Error("timed out: A re-checks E");
      expect(await relaySays(secret, a, "E", e.peerUrl)).toBeLessThan(300);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(view(a).refused.find((r) => r.id === "E")?.reason).toMatch(/^no-credential: /);
    expect(isMember(a, "E")).toBe(false);
    expect(a.runtime.peerHandlers().isKnownPeer("E")).toBe(false);
  });
});
