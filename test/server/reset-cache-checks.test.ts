/**
 * A cache reset starts a new SWIM (core/node/mesh.ts), which asked none of the old one's member checks:
 * they are abandoned at the reset (mesh-verify.ts [One SWIM]), their hellos' sockets closed and their
 * slots freed at once (not after their tries, about a minute), and a late answer to one reaches nothing;
 * a pool that a message on its way still uses stays open.
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import type { NodeInput } from "../../src/core/node/types.js";
import type { PeerClient } from "../../src/net/transport-client.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import type { Admin } from "../../src/server/runtime/admin.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { fakePeerClient, fakeSwimNode, meshPeersOver } from "./mesh-fakes.js";
import { relaySays } from "./mesh-relay.js";

const dir = mkdtempSync(join(tmpdir(), "pm-resetchecks-"));
const secret = randomBytes(32);
const secretFile = join(dir, "cluster.secret");
writeFileSync(secretFile, secret.toString("hex"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function until(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  for (const t0 = Date.now(); !cond(); ) {
    if (Date.now() - t0 > ms) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A test double of members on 127.0.0.1 whose hello never answers; its open sockets and requests. */
async function hangingMembersDouble() {
  const open = new Set<Socket>();
  let requests = 0;
  const server: Server = createServer(() => void requests++);
  server.on("connection", (s) => {
    open.add(s);
    s.on("close", () => open.delete(s));
  });
  const port = await freePort("127.0.0.1");
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  closers.push(async () => {
    for (const s of open) s.destroy();
    await new Promise((r) => server.close(r));
  });
  return { url: `http://127.0.0.1:${port}`, open, requests: () => requests };
}

async function nodeA(): Promise<NodeHandle> {
  const [api, peer] = await Promise.all([freePort("127.0.0.1"), freePort("127.0.0.1")]);
  const s = resolveNodeSettings(
    {
      id: "A",
      engine: "sim",
      simTimeScale: "0.02",
      pollMs: "100",
      gossip: "scuttlebutt",
      secretFile,
      logLevel: "silent",
      listen: `127.0.0.1:${api}`,
      peerListen: `127.0.0.1:${peer}`,
    },
    {},
  );
  const n = await startNode(s, { logger: pino({ level: "silent" }) });
  closers.push(() => n.stop());
  return n;
}

describe("a cache reset", () => {
  it("abandons the old SWIM's checks: their sockets closed, their slots free at once", async () => {
    const members = await hangingMembersDouble();
    const a = await nodeA();
    const mesh = a.runtime.mesh;
    if (mesh === undefined) throw new Error("A runs no SWIM");
    const ids = Array.from({ length: 8 }, (_, i) => `H${i}`);
    // A relay names them: A's SWIM must check each itself, and each hello hangs.
    for (const id of ids) await relaySays(secret, a, id, members.url);
    await until("each check's hello asked", () => members.requests() >= ids.length);
    expect(mesh.checksInFlight).toBe(ids.length);
    expect(members.open.size).toBeGreaterThanOrEqual(ids.length);

    const res = await fetch(`${a.apiUrl}/admin/reset-cache`, { method: "POST" });
    expect(res.status).toBe(200);
    // Left running, each would hold its slot through its tries (about a minute), beside the new SWIM's.
    await until("the old checks abandoned", () => mesh.checksInFlight === 0 && members.open.size === 0);
  }, 60_000);

  it("lets no late answer of an old check reach the new SWIM, nor settle its own check", async () => {
    const fed: NodeInput[] = [];
    const answers: ((hello: unknown) => void)[] = [];
    const client = fakePeerClient(new Set(), () => new Promise((r) => void answers.push(r)));
    const admin = { meshJoined() {}, meshLeft() {} } as unknown as Admin;
    const mesh = meshPeersOver(
      fakeSwimNode(() => undefined),
      client,
      admin,
      {
        feed: (i) => void fed.push(i),
      },
    );
    mesh.learn("B", "http://127.0.0.1:1", true);
    mesh.verify("B"); // the old SWIM's check
    await until("the old check's hello asked", () => answers.length === 1);
    mesh.newEpoch();
    mesh.verify("B"); // the new SWIM's own
    await until("the new check's hello asked", () => answers.length === 2);
    const hello = { id: "B", cluster: "c", model: "m", protocol: PROTOCOL_VERSION, gossip: "scuttlebutt" };
    answers[0]?.(hello);
    // The old answer passes a yes through no path: nothing fed, the new check still waits for its own.
    await new Promise((r) => setImmediate(r));
    expect(fed).toHaveLength(0);
    expect(mesh.checksInFlight).toBe(1);
    answers[1]?.(hello);
    await until("the new check answered", () => fed.length === 1);
    expect(fed[0]).toMatchObject({ type: "member-verified", id: "B", ok: true });
    expect(mesh.checksInFlight).toBe(0);
    mesh.stop();
  });

  it("keeps an abandoned check's pool while a message to it is on its way", () => {
    const pools = new Set<string>();
    // Test double: hellos never answer; mesh messages are held (on their way till the test ends).
    const client = {
      ...fakePeerClient(pools, () => new Promise(() => {})),
      sendMesh: () => new Promise(() => {}),
    } as unknown as PeerClient;
    const mesh = meshPeersOver(
      fakeSwimNode(() => undefined),
      client,
      {} as Admin,
    );
    mesh.learn("B", "http://127.0.0.1:1", true);
    mesh.learn("C", "http://127.0.0.1:2", true);
    mesh.verify("B");
    mesh.verify("C");
    expect([...pools].sort()).toEqual(["B", "C"]);
    void mesh.send("B", { channel: "swim", msg: { type: "gossip", updates: [] } }); // an answer to a joiner
    mesh.newEpoch();
    // Closing B's pool would abort that message; C's carried only its check.
    expect([...pools]).toEqual(["B"]);
    expect(mesh.checksInFlight).toBe(0);
    mesh.stop();
  });
});
