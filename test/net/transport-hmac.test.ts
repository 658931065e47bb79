/**
 * The peer transport with a shared secret (HMAC): forwards over HTTP, snapshots and their headers,
 * messages, and the refusals (401, 403, 405, 413) that keep bad requests from the node.
 */
import { describe, expect, it } from "vitest";
import { encodeSnapshot } from "../../src/core/snapshot-codec.js";
import { hmacAuth, insecureAuth } from "../../src/net/transport-auth.js";
import { fwd, SECRET, signed, snapshotMsg } from "./fixtures.js";
import { peerHarness } from "./transport-fixtures.js";

const { start, client } = peerHarness();

describe("peer transport (HMAC shared secret)", () => {
  // Forwards default to the channel (test/net/forward-channel.test.ts); these go over HTTP so the
  // server's POST /peer/forward route is exercised too.
  it("streams a forwarded request (HTTP transport) back chunk by chunk with its final result", async () => {
    const { url, log, wire } = await start(hmacAuth("B", SECRET));
    const c = client(hmacAuth("A", SECRET), {}, "http");
    c.setPeer("B", url);
    const chunks: string[] = [];
    const reply = await c.forward("B", fwd("A-1"), (t) => chunks.push(t));
    expect(chunks).toEqual(["o", "k"]);
    expect(reply).toMatchObject({ type: "result", reqId: "A-1", result: { text: "ok", promptTokens: 4 } });
    expect([...(log.forwards[0]?.request.tokens ?? [])]).toEqual([1, 2, 3, 4_000_000_000]);
    // Keep-alive pool: three requests, fewer connections. A forward resolves at its final record, a
    // moment before its connection is released, so the second forward may open a second one; the
    // hello then finds one idle.
    await c.forward("B", fwd("A-2"), () => {});
    expect(log.forwards).toHaveLength(2);
    expect(await c.hello("B")).toMatchObject({ id: "B" });
    expect(wire.httpForwards).toBe(2);
    expect(wire.connections).toBeLessThan(3);
  });

  it("delivers snapshots with the holds ack, and messages", async () => {
    const { url, log } = await start(hmacAuth("B", SECRET));
    const c = client(hmacAuth("A", SECRET));
    c.setPeer("B", url);
    const sent = snapshotMsg([1, 2, 3], { holds: { epoch: 5, version: 9 }, blocks: 3 });
    const bytes = await c.send("B", sent);
    await c.send("B", { type: "goodbye" });
    expect(log.snapshots).toEqual([{ from: "A", msg: sent, wireBytes: bytes }]);
    expect(log.messages).toEqual([{ from: "A", msg: { type: "goodbye" } }]);
    // Bytes that do not decode as a snapshot: refused before the node sees them.
    const bad = Uint8Array.from([0xff]);
    const res = await fetch(`${url}/peer/snapshot`, {
      method: "POST",
      headers: signed(hmacAuth("A", SECRET), "/peer/snapshot", bad, "application/octet-stream"),
      body: bad,
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toMatch(/^bad snapshot: /);
    expect(log.snapshots).toHaveLength(1);
  });

  it("encodes a snapshot object once, however many peers it goes to", async () => {
    const { url, log } = await start(hmacAuth("B", SECRET));
    const atC = await start(hmacAuth("C", SECRET), "C");
    const c = client(hmacAuth("A", SECRET));
    c.setPeer("B", url);
    c.setPeer("C", atC.url);
    // Only encoding reads a snapshot's header: count each object's reads.
    const counted = () => {
      const msg = snapshotMsg([1, 2, 3], { holds: { epoch: 5, version: 9 } });
      const { header } = msg.snapshot;
      const reads = { n: 0 };
      Object.defineProperty(msg.snapshot, "header", {
        enumerable: true,
        get: () => {
          reads.n++;
          return header;
        },
      });
      return { msg, reads };
    };
    const round1 = counted();
    await c.send("B", round1.msg);
    const once = round1.reads.n;
    expect(once).toBeGreaterThan(0);
    await c.send("C", round1.msg);
    expect(round1.reads.n).toBe(once);
    // The next round's snapshot, equal but another object, is encoded afresh.
    const round2 = counted();
    await c.send("B", round2.msg);
    expect(round2.reads.n).toBe(once);
    expect(log.snapshots.map((x) => x.msg)).toEqual([round1.msg, round2.msg]);
    expect(atC.log.snapshots.map((x) => x.msg)).toEqual([round1.msg]);
  });

  it("carries all five snapshot headers, and leaves a malformed one out", async () => {
    const { url, log } = await start(hmacAuth("B", SECRET));
    const c = client(hmacAuth("A", SECRET));
    c.setPeer("B", url);
    const sent = snapshotMsg([4], {
      holds: { epoch: 1, version: 2 },
      blocks: 7,
      at: 1795976827696.25,
      echo: { t: 12.5, heldMs: 0.75 },
      served: 42,
    });
    await c.send("B", sent);
    expect(log.snapshots[0]?.msg).toEqual(sent);
    // The same snapshot again, by hand, with a holds header that is not `epoch:version`.
    const body = Buffer.from(encodeSnapshot(sent.snapshot));
    expect(log.snapshots[0]?.wireBytes).toBe(body.byteLength);
    const res = await fetch(`${url}/peer/snapshot`, {
      method: "POST",
      headers: signed(hmacAuth("A", SECRET), "/peer/snapshot", body, "application/octet-stream", {
        "x-prefixmesh-holds": "not:a:version",
        "x-prefixmesh-served": "-3",
      }),
      body,
    });
    expect(res.status).toBe(204);
    expect(log.snapshots[1]?.msg).toEqual({ type: "snapshot", snapshot: sent.snapshot });
  });

  it("refuses unauthenticated or wrongly signed snapshots with 401 before they reach the node", async () => {
    const { url, log, wire } = await start(hmacAuth("B", SECRET));
    const unsigned = await fetch(`${url}/peer/snapshot`, {
      method: "POST",
      headers: { "content-type": "application/octet-stream", "x-prefixmesh-sender": "A" },
      body: Buffer.from([1, 2, 3]),
    });
    expect(unsigned.status).toBe(401);
    const wrong = client(hmacAuth("A", Buffer.alloc(32, 9)));
    wrong.setPeer("B", url);
    await expect(wrong.send("B", snapshotMsg([1]))).rejects.toMatchObject({ status: 401 });
    const stranger = client(hmacAuth("stranger", SECRET), {}, "http");
    stranger.setPeer("B", url);
    await expect(stranger.forward("B", fwd("s-1"), () => {})).rejects.toMatchObject({
      kind: "http",
      status: 403,
    });
    expect(wire.httpForwards).toBe(1);
    expect(log.snapshots).toHaveLength(0);
    expect(log.forwards).toHaveLength(0);
    expect(log.rejected).toEqual(["missing", "bad-signature", "unknown-peer"]);
  });

  it("answers an oversized snapshot with 413 when its body is kept in chunks (no HMAC)", async () => {
    const { url, log } = await start(insecureAuth("B"), "B", 1024);
    const c = client(insecureAuth("A"));
    c.setPeer("B", url);
    const big = snapshotMsg(Array.from({ length: 700 }, (_, i) => i + 1));
    await expect(c.send("B", big)).rejects.toMatchObject({ status: 413 });
    expect(log.snapshots).toHaveLength(0);
    await c.send("B", snapshotMsg([1, 2, 3]));
    expect(log.snapshots).toHaveLength(1);
  });

  it("answers a known path asked with the wrong method 405 with Allow, as the client port does", async () => {
    const { url } = await start(insecureAuth("B"));
    const cases: [string, string, string][] = [
      ["GET", "/peer/message", "POST"],
      ["GET", "/peer/forward", "POST"],
      ["GET", "/peer/snapshot", "POST"],
      ["PUT", "/peer/mesh", "POST"],
      ["POST", "/peer/hello?x=1", "GET, HEAD"],
    ];
    const as = { "x-prefixmesh-sender": "A" };
    for (const [method, path, allow] of cases) {
      const r = await fetch(`${url}${path}`, { method, headers: as });
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.headers.get("allow"), path).toBe(allow);
      const body = (await r.json()) as { error: string };
      expect(body.error).toContain(`allowed: ${allow}`);
    }
    const none = await fetch(`${url}/peer/nothing`, { method: "POST", headers: as });
    expect(none.status).toBe(404);
    expect(none.headers.get("allow")).toBeNull();
    // A stranger learns nothing of the routes: authentication comes first.
    expect((await fetch(`${url}/peer/message`)).status).toBe(401);
  });

  it("answers an oversized snapshot with 413", async () => {
    const { url, log } = await start(hmacAuth("B", SECRET), "B", 1024);
    const c = client(hmacAuth("A", SECRET));
    c.setPeer("B", url);
    const big = snapshotMsg(Array.from({ length: 700 }, (_, i) => i + 1));
    await expect(c.send("B", big)).rejects.toMatchObject({ status: 413 });
    expect(log.snapshots).toHaveLength(0);
  });
});
