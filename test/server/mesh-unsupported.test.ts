/**
 * A rolling upgrade's newer nodes must not fire the "Bad gossip" alert: a mesh message refused at a
 * kind this build does not know, from a sender whose checked hello names a newer protocol, counts as
 * `unsupported`, not `invalid` (mesh-peers.ts [Newer is not invalid]); garbage, or an unknown kind
 * from a sender of our protocol or one never checked, is still `invalid`. Through the real peer port
 * (shared-secret mode, 127.0.0.1) and MeshPeers, with a fake node and client.
 */
import { afterEach, describe, expect, it } from "vitest";
import { crc32 } from "../../src/core/crc32.js";
import type { PrefixNode } from "../../src/core/node/node.js";
import type { NodeInput } from "../../src/core/node/types.js";
import { encodeSnapshot } from "../../src/core/snapshot-codec.js";
import { signPeerRequest } from "../../src/net/auth/hmac.js";
import { decodeMesh, encodeMesh, MESH_PATH } from "../../src/net/mesh-wire.js";
import { hmacAuth } from "../../src/net/transport-auth.js";
import type { PeerClient } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import type { PeerHello } from "../../src/net/wire-schemas.js";
import type { NodeMetrics } from "../../src/server/metrics.js";
import type { Admin } from "../../src/server/runtime/admin.js";
import { MeshPeers } from "../../src/server/runtime/mesh-peers.js";
import { SECRET } from "../net/fixtures.js";

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const hello = (id: string, protocol: number, minProtocol = protocol): PeerHello => ({
  id,
  cluster: "c",
  model: "m",
  protocol,
  minProtocol,
  gossip: "scuttlebutt",
});

/** MeshPeers of node A behind a real peer port; `hellos` is what each id's (proven) hello says. */
async function nodeA(hellos: Record<string, PeerHello>, now: () => number = Date.now) {
  const pools = new Set<string>();
  const node = { id: "A", config: { gossip: "scuttlebutt" }, meshMembers: () => [] } as unknown as PrefixNode;
  const client = {
    authMode: "hmac",
    has: (id: string) => pools.has(id),
    setPeer: (id: string) => void pools.add(id),
    removePeer: (id: string) => void pools.delete(id),
    verifiedHello: (id: string) => {
      reads.push(id);
      return Promise.resolve(hellos[id]);
    },
  } as unknown as PeerClient;
  /** Every hello read, by id. */
  const reads: string[] = [];
  const verified: string[] = [];
  const noop = { inc() {} };
  const quiet = { info() {}, warn() {}, error() {}, debug() {} };
  const mesh = new MeshPeers({
    node,
    client,
    admin: {} as Admin,
    metrics: { authRejected: noop, gossipBytes: noop } as unknown as NodeMetrics,
    logger: quiet,
    clusterId: "c",
    helloModel: "m",
    feed: (i: NodeInput) => void (i.type === "member-verified" && verified.push(i.id)),
    maxMessageBytes: 1 << 20,
    now,
  });
  closers.push(() => mesh.stop());
  const server = buildPeerServer({
    auth: hmacAuth("A", SECRET),
    handlers: {
      hello: () => hello("A", PROTOCOL_VERSION),
      isKnownPeer: () => false, // the mesh route is open to non-members: joiners send there first
      onMessage() {},
      onForward() {},
      onMesh: (from, body) => mesh.onMesh(from, body),
    },
  });
  closers.push(() => server.close());
  const url = await server.listen({ host: "127.0.0.1", port: 0 });

  /** Verifies each id as SWIM would ask (its hello read and checked), waiting for every answer. */
  const verify = async (...ids: string[]) => {
    const want = verified.length + ids.length;
    for (const id of ids) {
      mesh.learn(id, `http://127.0.0.1:${9}`, true);
      mesh.verify(id);
    }
    for (const t0 = Date.now(); verified.length < want; ) {
      if (Date.now() - t0 > 10_000) throw new Error("timed out: verifications not answered");
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  /** `body` to A's mesh route, signed by `sender`: the HTTP status and error. */
  const post = async (sender: string, body: Uint8Array) => {
    const headers = signPeerRequest({
      secret: SECRET,
      sender,
      destination: "A",
      method: "POST",
      path: MESH_PATH,
      body,
      now: Date.now(),
    });
    const res = await fetch(`${url}${MESH_PATH}`, {
      method: "POST",
      body: Buffer.from(body),
      headers: { ...headers, "content-type": "application/octet-stream" },
    });
    const text = await res.text();
    return { status: res.status, error: text ? (JSON.parse(text) as { error?: string }).error : undefined };
  };
  const counts = () => ({ invalid: mesh.refusedMessages, unsupported: mesh.unsupportedMessages });
  /** Waits for the counts to reach `want` (a hello read decides them), with a generous deadline. */
  const settled = async (want: ReturnType<typeof counts>) => {
    for (const t0 = Date.now(); JSON.stringify(counts()) !== JSON.stringify(want); ) {
      if (Date.now() - t0 > 10_000) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(counts()).toEqual(want);
  };
  return { mesh, verify, post, counts, settled, reads };
}

// Kinds this build does not know: a SWIM type byte, a mesh channel, a gossip type byte.
const NEW_SWIM_TYPE = Uint8Array.of(0, 0, 200);
const NEW_CHANNEL = Uint8Array.of(2, 0);
const NEW_GOSSIP_TYPE = Uint8Array.of(1, 0, 9);
// A known kind, cut short: garbage whoever sends it.
const ping = encodeMesh({ channel: "swim", msg: { type: "ping", seq: 1, updates: [] } }, []);
const TRUNCATED_PING = ping.subarray(0, ping.length - 1);

describe("mesh messages refused for a newer protocol", () => {
  it("count as unsupported from a sender whose hello names a newer protocol; garbage stays invalid", async () => {
    const newer = PROTOCOL_VERSION + 1;
    const a = await nodeA({
      N: hello("N", newer, PROTOCOL_VERSION), // a newer build that still speaks ours: a member
      W: hello("W", newer + 1, newer), // wholly newer: refused as a member, yet it may send us gossip
      O: hello("O", PROTOCOL_VERSION), // our own build
    });
    await a.verify("N", "W", "O");

    for (const body of [NEW_SWIM_TYPE, NEW_CHANNEL, NEW_GOSSIP_TYPE]) {
      const r = await a.post("N", body);
      expect(r.status).toBe(400);
      expect(r.error).toContain(`its sender speaks protocol ${newer}, this node ${PROTOCOL_VERSION}`);
    }
    expect(a.counts()).toEqual({ invalid: 0, unsupported: 3 });
    expect((await a.post("W", NEW_SWIM_TYPE)).status).toBe(400);
    expect(a.counts()).toEqual({ invalid: 0, unsupported: 4 });

    // Garbage in a kind this build knows is garbage, whatever the sender's protocol.
    expect((await a.post("N", TRUNCATED_PING)).status).toBe(400);
    expect(a.counts()).toEqual({ invalid: 1, unsupported: 4 });
    // An unknown kind from our own build, or from a sender whose hello was never read: invalid.
    expect((await a.post("O", NEW_SWIM_TYPE)).status).toBe(400);
    expect((await a.post("U", NEW_GOSSIP_TYPE)).status).toBe(400);
    await a.settled({ invalid: 3, unsupported: 4 });

    // A message this build reads is neither.
    expect((await a.post("N", ping)).status).toBe(204);
    expect(a.counts()).toEqual({ invalid: 3, unsupported: 4 });

    // A new epoch starts both over.
    a.mesh.newEpoch();
    expect(a.counts()).toEqual({ invalid: 0, unsupported: 0 });
  });

  it("go back to invalid once the sender's hello no longer names a newer protocol (rolled back)", async () => {
    const hellos = { N: hello("N", PROTOCOL_VERSION + 1, PROTOCOL_VERSION) };
    const a = await nodeA(hellos);
    await a.verify("N");
    expect((await a.post("N", NEW_SWIM_TYPE)).status).toBe(400);
    expect(a.counts()).toEqual({ invalid: 0, unsupported: 1 });
    hellos.N = hello("N", PROTOCOL_VERSION);
    await a.verify("N");
    expect((await a.post("N", NEW_SWIM_TYPE)).status).toBe(400);
    expect(a.counts()).toEqual({ invalid: 1, unsupported: 1 });
  });
});

describe("a member upgraded in place", () => {
  it("has its hello read again at its first unknown kind, so a newer build's counts as unsupported", async () => {
    // SWIM re-admits a member that restarted (a higher incarnation) with no new verification: the
    // hello this node last read of N is its old build's.
    const hellos = { N: hello("N", PROTOCOL_VERSION), O: hello("O", PROTOCOL_VERSION) };
    const a = await nodeA(hellos);
    await a.verify("N", "O");
    hellos.N = hello("N", PROTOCOL_VERSION + 1, PROTOCOL_VERSION);
    a.reads.length = 0;
    expect((await a.post("N", NEW_SWIM_TYPE)).status).toBe(400);
    expect((await a.post("N", NEW_GOSSIP_TYPE)).status).toBe(400);
    await a.settled({ invalid: 0, unsupported: 2 });
    // Known newer now: counted at once, no hello read again.
    expect((await a.post("N", NEW_CHANNEL)).status).toBe(400);
    expect(a.counts()).toEqual({ invalid: 0, unsupported: 3 });
    expect(a.reads).toEqual(["N"]);
    // Our own build's unknown kind is garbage once its hello is read again; the next one, within the
    // re-read's wait, is counted at once on that reading.
    expect((await a.post("O", NEW_SWIM_TYPE)).status).toBe(400);
    await a.settled({ invalid: 1, unsupported: 3 });
    expect((await a.post("O", NEW_SWIM_TYPE)).status).toBe(400);
    expect(a.counts()).toEqual({ invalid: 2, unsupported: 3 });
    expect(a.reads).toEqual(["N", "O"]);
  });
});

describe("a member rolled back in place", () => {
  it("has its hello read again once the newer one read is old, so its unknown kinds are garbage again", async () => {
    const hellos = { N: hello("N", PROTOCOL_VERSION + 1, PROTOCOL_VERSION) };
    let later = 0;
    const a = await nodeA(hellos, () => Date.now() + later);
    await a.verify("N");
    expect((await a.post("N", NEW_SWIM_TYPE)).status).toBe(400);
    expect(a.counts()).toEqual({ invalid: 0, unsupported: 1 });
    // N restarts on our build a while later, and SWIM takes it back with no new verification.
    hellos.N = hello("N", PROTOCOL_VERSION);
    later = 10 * 60_000;
    a.reads.length = 0;
    expect((await a.post("N", NEW_SWIM_TYPE)).status).toBe(400);
    await a.settled({ invalid: 1, unsupported: 1 });
    expect(a.reads).toEqual(["N"]);
  });
});

describe("decodeMesh: refused at a kind marker or not", () => {
  const header = {
    sender: "N",
    epoch: 1,
    version: 1,
    tokenCount: 0,
    capacity: 10,
    queueDepth: 0,
    pushBackMs: 0,
  };
  /**
   * A gossip states message of one whole snapshot frame (type 1), its byte `at` set to `value` (if
   * given) and its CRC made again if `seal`.
   */
  const states = (at?: number, value = 0, seal = true) => {
    const frame = encodeSnapshot({ kind: "heartbeat", header });
    if (at !== undefined) frame[at] = value;
    const n = frame.length;
    if (seal) new DataView(frame.buffer, frame.byteOffset).setUint32(n - 4, crc32(frame, 0, n - 4), true);
    return Uint8Array.from([1, 0, 1, 1, n, ...frame, 1, 0]);
  };

  it("a state's newer snapshot format or unknown kind is one; a bad checksum or a cut message is not", () => {
    const kind = (b: Uint8Array) => {
      const d = decodeMesh(b, 1 << 20);
      return d.ok ? "ok" : d.unknownKind;
    };
    expect(kind(states())).toBe("ok");
    expect(kind(states(4, 9))).toBe(true); // format version
    expect(kind(states(5, 200))).toBe(true); // snapshot kind
    expect(kind(states(8, 0xff, false))).toBe(false); // altered: its CRC fails
    expect(kind(NEW_SWIM_TYPE)).toBe(true);
    expect(kind(NEW_CHANNEL)).toBe(true);
    expect(kind(NEW_GOSSIP_TYPE)).toBe(true);
    expect(kind(TRUNCATED_PING)).toBe(false);
    expect(kind(Uint8Array.of(0, 200))).toBe(false); // 200 addresses announced, none there
  });
});
