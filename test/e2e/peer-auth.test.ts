/**
 * Captured shared-secret traffic against real node processes. Three nodes A, B, C share a secret; A
 * reaches B through a recording TCP relay (an on-path observer), so the test holds the exact bytes of
 * A's snapshots and forwards to B. Sent again — to C, or to B a second time, or with an
 * x-prefixmesh-* header altered, added or dropped, or with the destination rewritten — every one is
 * refused (401, counted by reason), while the honest cluster keeps answering and forwarding over HTTP
 * (A) and the forward channel (B, C). In the daemon's gossip mode the captured peer traffic is its
 * mesh messages (`/peer/mesh`) and forwards; the snapshot, with its ack, clock and echo headers, is
 * the full mesh's wire, captured from a cluster run with `--gossip full`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeSecretFile } from "../../src/net/auth/secret.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { modelOf, postCompletion } from "../api-client.js";
import { type Spawned, spawnCli, waitFor } from "./helpers.js";

/** One HTTP/1.1 request as it crossed the relay. */
interface Captured {
  method: string;
  path: string;
  /** In wire order, names as sent. */
  headers: [string, string][];
  body: Buffer;
  /** When the relay saw it (ms, performance.now()). */
  at: number;
}

/** The complete requests in one connection's client-to-server bytes (up to an upgrade). */
function parseRequests(buf: Buffer, at: number): Captured[] {
  const out: Captured[] = [];
  let off = 0;
  for (let n = 0; n < 10_000; n++) {
    const end = buf.indexOf("\r\n\r\n", off);
    if (end < 0) break;
    const [line = "", ...rest] = buf.toString("latin1", off, end).split("\r\n");
    const [method = "", path = ""] = line.split(" ");
    const headers = rest.map((h): [string, string] => {
      const i = h.indexOf(":");
      return [h.slice(0, i), h.slice(i + 1).trim()];
    });
    const get = (name: string) => headers.find(([k]) => k.toLowerCase() === name)?.[1];
    const len = Number(get("content-length") ?? 0);
    if (buf.length < end + 4 + len) break;
    out.push({ method, path, headers, body: buf.subarray(end + 4, end + 4 + len), at });
    off = end + 4 + len;
    if (get("upgrade")) break; // frames follow, not requests
  }
  return out;
}

/** A TCP relay to `target` keeping every connection's client-to-server bytes. */
async function relay(port: number, target: number) {
  const conns: { bytes: Buffer[]; at: number }[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const rec = { bytes: [] as Buffer[], at: 0 };
    conns.push(rec);
    const up = connect(target, "127.0.0.1");
    for (const s of [client, up]) {
      sockets.add(s);
      s.on("error", () => {});
      s.on("close", () => {
        sockets.delete(s);
        client.destroy();
        up.destroy();
      });
    }
    client.on("data", (d: Buffer) => {
      rec.bytes.push(d);
      rec.at = performance.now();
    });
    client.pipe(up);
    up.pipe(client);
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  return {
    requests: () => conns.flatMap((c) => parseRequests(Buffer.concat(c.bytes), c.at)),
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/**
 * Sends `r` on a fresh connection to `port`, headers edited by `edit` (value undefined drops one;
 * names compared case-insensitively), and returns the status and body.
 */
function sendRaw(
  port: number,
  r: Captured,
  edit: Record<string, string | undefined> = {},
): Promise<{ status: number; body: string }> {
  const lower = Object.fromEntries(Object.entries(edit).map(([k, v]) => [k.toLowerCase(), v]));
  const headers: [string, string][] = [];
  for (const [k, v] of r.headers) {
    const l = k.toLowerCase();
    if (l === "connection") continue;
    if (l in lower) {
      const nv = lower[l];
      if (nv !== undefined) headers.push([k, nv]);
      delete lower[l];
    } else headers.push([k, v]);
  }
  for (const [k, v] of Object.entries(lower)) if (v !== undefined) headers.push([k, v]);
  headers.push(["connection", "close"]);
  const head = `${r.method} ${r.path} HTTP/1.1\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`;
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    s.on("data", (d: Buffer) => chunks.push(d));
    s.on("error", reject);
    s.setTimeout(10_000, () => s.destroy(new Error("no answer in 10 s")));
    s.once("connect", () => s.end(Buffer.concat([Buffer.from(head, "latin1"), r.body])));
    s.once("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, body: text.slice(text.indexOf("\r\n\r\n") + 4) });
    });
  });
}

const ids = ["A", "B", "C"] as const;
const header = (r: Captured, name: string) => r.headers.find(([k]) => k.toLowerCase() === name)?.[1];
const fromA = (r: Captured) => header(r, "x-prefixmesh-sender") === "A";
/** Rejection counts that changed from `a` to `b`. */
const diff = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(
    Object.keys({ ...a, ...b })
      .map((k) => [k, (b[k] ?? 0) - (a[k] ?? 0)] as const)
      .filter(([, n]) => n !== 0),
  );

/** Three shared-secret nodes, A reaching B through the recording relay; `undefined`: the daemon's mode. */
function capturedCluster(gossip: "full" | undefined) {
  const procs: Spawned[] = [];
  const api: Record<string, string> = {};
  const peerPort: Record<string, number> = {};
  let dir: string;
  let tap: Awaited<ReturnType<typeof relay>>;
  let model: string;

  /** `prefixmesh_peer_auth_rejected_total` of node `id`, by reason. */
  const rejected = async (id: string) => {
    const text = await (await fetch(`${api[id]}/metrics`)).text();
    const out: Record<string, number> = {};
    for (const m of text.matchAll(
      /^prefixmesh_peer_auth_rejected_total\{[^}]*reason="([^"]+)"[^}]*\} (\d+)/gm,
    ))
      out[m[1] as string] = Number(m[2]);
    return out;
  };
  /** The latest captured request to `path` satisfying `ok`, once there is one. */
  const latest = async (path: string, ok: (r: Captured) => boolean, what: string) => {
    let found: Captured | undefined;
    await waitFor(
      () => {
        found = tap
          .requests()
          .filter((r) => r.path === path && ok(r))
          .at(-1);
        return found !== undefined;
      },
      30_000,
      what,
    );
    return found as Captured;
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "pm-e2e-auth-"));
    const secret = join(dir, "cluster.secret");
    await writeSecretFile(secret);
    const ports = await Promise.all(Array.from({ length: 7 }, () => freePort("127.0.0.1")));
    for (const [i, id] of ids.entries()) {
      api[id] = `http://127.0.0.1:${ports[2 * i]}`;
      peerPort[id] = ports[2 * i + 1] as number;
    }
    const relayPort = ports[6] as number;
    tap = await relay(relayPort, peerPort.B as number);
    // Full mesh: A reaches B through the relay only; everyone else talks directly. Gossip
    // "scuttlebutt" learns addresses from the members themselves: B advertises the relay, so every
    // node reaches B through it (the captures below are filtered by sender).
    const viaRelay = (from: string, to: string) => to === "B" && (from === "A" || gossip !== "full");
    const peerUrl = (from: string, to: string) =>
      `http://127.0.0.1:${viaRelay(from, to) ? relayPort : peerPort[to]}`;
    for (const id of ids) {
      const peers = ids
        .filter((p) => p !== id)
        .map((p) => `${p}=${peerUrl(id, p)}`)
        .join(",");
      procs.push(
        spawnCli([
          "node",
          ...["--id", id, "--listen", new URL(api[id] as string).host, "--peer-listen"],
          `127.0.0.1:${peerPort[id]}`,
          ...["--peers", peers, "--secret-file", secret],
          ...["--engine", "sim", "--sim-time-scale", "0.02", "--poll-ms", "100", "--policy", "round-robin"],
          // A forwards one HTTP request each (the relay sees them); B and C use the channel.
          ...(id === "A" ? ["--forward-transport", "http"] : []),
          ...(gossip === "full" ? ["--gossip", "full"] : []),
          ...(id === "B" && gossip !== "full" ? ["--advertise", `127.0.0.1:${relayPort}`] : []),
          ...["--log-level", "warn"],
        ]),
      );
    }
    await waitFor(
      async () => {
        for (const id of ids) {
          // A node still starting answers 503 (`loading`) with an error body: not yet.
          const v = await fetch(`${api[id]}/cluster`).then(
            (r) =>
              r.ok ? (r.json() as Promise<{ peers?: { id: string; suspected?: boolean }[] }>) : undefined,
            () => undefined,
          );
          if (v?.peers?.length !== 2 || v.peers.some((p) => p.suspected !== false)) return false;
        }
        return true;
      },
      60_000,
      "every node to see both peers live",
    );
    model = await modelOf(api.A as string);
  });
  afterAll(async () => {
    for (const p of procs) p.child.kill("SIGTERM");
    await Promise.all(procs.map((p) => p.exited));
    await tap?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return { rejected, latest, peerPort, api, tap: () => tap, model: () => model };
}

describe("captured shared-secret requests against real nodes (the daemon's gossip mode)", () => {
  const c = capturedCluster(undefined);

  it("refuses every replayed or altered copy of a captured mesh message, counted by reason", async () => {
    const msg = await c.latest("/peer/mesh", fromA, "a captured A→B mesh message");
    expect(header(msg, "x-prefixmesh-destination")).toBe("B");
    const [b0, c0] = [await c.rejected("B"), await c.rejected("C")];
    // Replayed as captured: to another node, then to its own again; rewritten for C.
    const toC = await sendRaw(c.peerPort.C as number, msg);
    expect(toC.status).toBe(401);
    expect(toC.body).toMatch(/wrong-destination/);
    const toB = await sendRaw(c.peerPort.B as number, msg);
    expect(toB.status).toBe(401);
    expect(toB.body).toMatch(/replay/);
    expect((await sendRaw(c.peerPort.C as number, msg, { "x-prefixmesh-destination": "C" })).status).toBe(
      401,
    );
    // A header added, and one body byte altered (the message the membership would act on).
    const altered = { ...msg, body: Buffer.from(msg.body) };
    const last = altered.body.length - 1;
    altered.body[last] = (altered.body[last] as number) ^ 1;
    for (const [r, edit] of [
      [msg, { "x-prefixmesh-extra": "1" }],
      [altered, {}],
    ] as const) {
      const res = await sendRaw(c.peerPort.B as number, r, edit);
      expect({ status: res.status, error: res.body }).toMatchObject({
        status: 401,
        error: expect.stringMatching(/bad-signature/),
      });
    }
    const [b1, c1] = [await c.rejected("B"), await c.rejected("C")];
    // Exactly the copies sent here were refused: nothing honest was, meanwhile.
    expect(diff(c0, c1)).toEqual({ "wrong-destination": 1, "bad-signature": 1 });
    expect(diff(b0, b1)).toEqual({ replay: 1, "bad-signature": 2 });
  });

  it("refuses a captured forward replayed to another node or to its own, and keeps serving", async () => {
    // Round-robin: a few requests entering at A include one forwarded to B, over HTTP via the relay.
    const entered: string[] = [];
    await waitFor(
      async () => {
        const r = await postCompletion(c.api.A as string, {
          model: c.model(),
          prompt: `ask ${entered.length}`,
          max_tokens: 2,
        });
        expect(r.status).toBe(200);
        entered.push(r.headers.get("x-prefixmesh-served-by") ?? "");
        return c
          .tap()
          .requests()
          .some((q) => q.path === "/peer/forward" && fromA(q));
      },
      30_000,
      "A to forward a request to B",
    );
    const fwd = await c.latest("/peer/forward", fromA, "a captured forward from A");
    const [b0, c0] = [await c.rejected("B"), await c.rejected("C")];
    expect((await sendRaw(c.peerPort.C as number, fwd)).status).toBe(401);
    expect((await sendRaw(c.peerPort.B as number, fwd)).status).toBe(401);
    const [b1, c1] = [await c.rejected("B"), await c.rejected("C")];
    expect((c1["wrong-destination"] ?? 0) - (c0["wrong-destination"] ?? 0)).toBe(1);
    expect((b1.replay ?? 0) - (b0.replay ?? 0)).toBe(1);

    // The honest cluster: every request at every node answered, some served by a peer (HTTP from A,
    // the channel from B and C).
    for (const id of ids) {
      const servedBy = new Set<string>();
      for (let i = 0; i < 12; i++) {
        const r = await postCompletion(c.api[id] as string, {
          model: c.model(),
          prompt: `${id} honest ${i}`,
          max_tokens: 2,
        });
        expect(r.status).toBe(200);
        servedBy.add(r.headers.get("x-prefixmesh-served-by") ?? "");
      }
      expect([...servedBy].some((s) => s !== id)).toBe(true);
    }
  });
});

// The snapshot and its ack, clock and echo headers are the full mesh's wire (--gossip full) only.
describe("captured shared-secret snapshots against real nodes (--gossip full)", () => {
  const c = capturedCluster("full");

  it("refuses every replayed or altered copy of a captured snapshot, counted by reason", async () => {
    const full = (r: Captured) =>
      ["x-prefixmesh-holds", "x-prefixmesh-at", "x-prefixmesh-echo"].every((h) => header(r, h) !== undefined);
    const snap = await c.latest(
      "/peer/snapshot",
      (r) => fromA(r) && full(r),
      "a captured A→B snapshot with holds, at and echo",
    );
    expect(header(snap, "x-prefixmesh-destination")).toBe("B");
    const [b0, c0] = [await c.rejected("B"), await c.rejected("C")];

    // Replayed as captured: to another node, then to its own again.
    const toC = await sendRaw(c.peerPort.C as number, snap);
    expect(toC.status).toBe(401);
    expect(toC.body).toMatch(/wrong-destination/);
    const toB = await sendRaw(c.peerPort.B as number, snap);
    expect(toB.status).toBe(401);
    expect(toB.body).toMatch(/replay/);
    // Rewritten for C: the signature does not cover that destination.
    expect((await sendRaw(c.peerPort.C as number, snap, { "x-prefixmesh-destination": "C" })).status).toBe(
      401,
    );

    // The ack, block count, clock and echo, each forged; a header dropped; one added.
    const edits: Record<string, string | undefined>[] = [
      { "x-prefixmesh-holds": "1:999999" },
      { "x-prefixmesh-at": "1.000" },
      { "x-prefixmesh-echo": "1.000:0.000" },
      { "x-prefixmesh-holds": undefined },
      { "x-prefixmesh-echo": undefined },
      { "x-prefixmesh-extra": "1" },
      ...(header(snap, "x-prefixmesh-blocks") !== undefined ? [{ "x-prefixmesh-blocks": "999999" }] : []),
    ];
    for (const e of edits) {
      const r = await sendRaw(c.peerPort.B as number, snap, e);
      expect({ edit: e, status: r.status, error: r.body }).toMatchObject({
        status: 401,
        error: expect.stringMatching(/bad-signature/),
      });
    }
    const [b1, c1] = [await c.rejected("B"), await c.rejected("C")];
    // Exactly the copies sent here were refused: nothing honest was, meanwhile.
    expect(diff(c0, c1)).toEqual({ "wrong-destination": 1, "bad-signature": 1 });
    expect(diff(b0, b1)).toEqual({ replay: 1, "bad-signature": edits.length });
  });
});
