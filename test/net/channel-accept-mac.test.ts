/**
 * The forward channel's 101 answer in shared-secret mode (auth/channel-mac.ts): the serving node tags
 * it, bound to the upgrade (nonce, signature, both node ids) and what it settles; the origin refuses a
 * 101 without its peer's tag before any frame, with a reason that says so, and its forward fails as a
 * garbled one (the runtime falls back: test/server/channel-accept-auth.test.ts). All on 127.0.0.1.
 */
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { type WebSocket, WebSocketServer } from "ws";
import { answerRecord } from "../../src/net/answer-wire.js";
import {
  type ChannelAccept,
  type ChannelBinding,
  channelAcceptTag,
  checkChannelAcceptTag,
  frameMac,
  HEADER_CHANNEL_MAC,
} from "../../src/net/auth/channel-mac.js";
import { HEADER_NONCE, HEADER_SENDER, HEADER_SIGNATURE } from "../../src/net/auth/hmac.js";
import { encodeRecords } from "../../src/net/channel-server.js";
import { decodeForwardFrame } from "../../src/net/forward-frame.js";
import { hmacAuth, insecureAuth, type PeerAuth } from "../../src/net/transport-auth.js";
import { CHANNEL_ACCEPT_REFUSED, PeerClient, TransportError } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import { CHANNEL_PATH, PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { fwd, resultFor, SECRET } from "./fixtures.js";
import { onPathUpgradeRelay } from "./on-path-relay.js";

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

const binding: ChannelBinding = { nonce: "n".repeat(32), client: "A", server: "B" };
const answer: ChannelAccept = {
  accept: "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
  extensions: "",
  protocol: "",
  signature: "ab".repeat(32),
};

describe("channelAcceptTag", () => {
  it("checks only the tag of this upgrade's answer by the node it was sent to", () => {
    const tag = channelAcceptTag(SECRET, binding, answer);
    expect(checkChannelAcceptTag(SECRET, binding, answer, tag)).toBe(true);
    const refused: [string, boolean][] = [
      ["another nonce", checkChannelAcceptTag(SECRET, { ...binding, nonce: "m".repeat(32) }, answer, tag)],
      ["another server", checkChannelAcceptTag(SECRET, { ...binding, server: "C" }, answer, tag)],
      ["another client", checkChannelAcceptTag(SECRET, { ...binding, client: "C" }, answer, tag)],
      ["another accept key", checkChannelAcceptTag(SECRET, binding, { ...answer, accept: "x" }, tag)],
      [
        "compression agreed",
        checkChannelAcceptTag(SECRET, binding, { ...answer, extensions: "permessage-deflate" }, tag),
      ],
      [
        "another request",
        checkChannelAcceptTag(SECRET, binding, { ...answer, signature: "cd".repeat(32) }, tag),
      ],
      ["another secret", checkChannelAcceptTag(Buffer.alloc(32, 9), binding, answer, tag)],
      [
        "a frame key's tag",
        checkChannelAcceptTag(
          SECRET,
          binding,
          answer,
          frameMac(SECRET, binding, "server").seal(Buffer.from("x")).subarray(0, 16).toString("hex"),
        ),
      ],
      ["no tag", checkChannelAcceptTag(SECRET, binding, answer, undefined)],
      ["a short tag", checkChannelAcceptTag(SECRET, binding, answer, tag.slice(2))],
      ["not hex", checkChannelAcceptTag(SECRET, binding, answer, `${tag.slice(2)}zz`)],
      ["a repeated header", checkChannelAcceptTag(SECRET, binding, answer, `${tag}, ${tag}`)],
    ];
    for (const [what, ok] of refused) expect(ok, what).toBe(false);
  });
});

/** A real peer server "B" whose fake node answers each forward with its reqId. */
async function realPeer(auth: PeerAuth) {
  const forwards: string[] = [];
  const hellos = { n: 0 };
  const server: FastifyInstance = buildPeerServer({
    auth,
    handlers: {
      // As admin.ts says it: a build that seals its 101 says so, an older one says nothing.
      hello: () => {
        hellos.n++;
        return {
          id: "B",
          cluster: "c1",
          model: "m",
          protocol: PROTOCOL_VERSION,
          ...(auth.sealChannelAccept ? { channelAcceptMac: true } : {}),
        };
      },
      isKnownPeer: () => true,
      onMessage() {},
      onForward: (_from, msg, reply) => {
        forwards.push(msg.reqId);
        reply.finish(resultFor(msg, msg.reqId));
      },
    },
  });
  closers.push(() => server.close());
  return { url: await server.listen({ host: "127.0.0.1", port: 0 }), forwards, hellos };
}

/** Forwards until one is served, each failing one refused as a 101 without its MAC (generous deadline). */
async function servedSoon(c: PeerClient, ms = 10_000): Promise<void> {
  for (let i = 0, t0 = Date.now(); ; i++) {
    const ok = await c
      .forward("B", fwd(`A-poll-${i}`), () => {})
      .then(
        () => true,
        (e: unknown) => {
          expect((e as TransportError).authRefusal).toBe(CHANNEL_ACCEPT_REFUSED);
          return false;
        },
      );
    if (ok) return;
    if (Date.now() - t0 > ms) throw new Error("timed out: the forward is still refused");
    await new Promise((r) => setTimeout(r, 50));
  }
}

function client(auth: PeerAuth = hmacAuth("A", SECRET)) {
  const c = new PeerClient({ auth, timeouts: { connectMs: 2_000, firstByteMs: 5_000 } });
  closers.push(() => c.close());
  return c;
}

/** Why a forward failed: the TransportError's fields the runtime acts on. */
async function failure(c: PeerClient, reqId: string) {
  const err = await c
    .forward("B", fwd(reqId), () => {})
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(err).toBeInstanceOf(TransportError);
  const e = err as TransportError;
  return { kind: e.kind, unauthenticated: e.unauthenticated, authRefusal: e.authRefusal, message: e.message };
}

const REFUSED_MISSING = {
  kind: "protocol",
  unauthenticated: true,
  authRefusal: CHANNEL_ACCEPT_REFUSED,
  message: expect.stringMatching(/^peer B: forward channel refused: its 101 answer carries no channel MAC/),
};
const REFUSED_WRONG = {
  kind: "protocol",
  unauthenticated: true,
  authRefusal: CHANNEL_ACCEPT_REFUSED,
  message: expect.stringMatching(/^peer B: forward channel refused: its 101 answer fails its channel MAC/),
};

describe("the 101 answer of a real peer (shared-secret mode)", () => {
  it("carries its channel MAC, and the channel runs", async () => {
    const { url, forwards } = await realPeer(hmacAuth("B", SECRET));
    const relay = await onPathUpgradeRelay(url);
    closers.push(relay.close);
    const c = client();
    c.setPeer("B", relay.url);
    await expect(c.forward("B", fwd("A-1"), () => {})).resolves.toMatchObject({
      type: "result",
      reqId: "A-1",
    });
    expect(forwards).toEqual(["A-1"]);
    expect(relay.heads[0]).toMatch(/^HTTP\/1\.1 101 /);
    expect(relay.heads[0]).toMatch(new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]{32}(\\r\\n|$)`));
  });

  it("is refused when the path strips its MAC or puts another upgrade's in, and no forward runs", async () => {
    const { url, forwards } = await realPeer(hmacAuth("B", SECRET));
    let mode: "strip" | "replay" | "pass" = "pass";
    let kept: string | undefined;
    const relay = await onPathUpgradeRelay(url, (head) => {
      const tag = new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: ([0-9a-f]+)`).exec(head)?.[1];
      if (mode === "pass") {
        kept = tag;
        return head;
      }
      if (mode === "strip") return head.replace(new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]+`), "");
      return head.replace(tag ?? "", kept ?? ""); // an earlier channel's tag: another nonce and key
    });
    closers.push(relay.close);

    const c = client();
    c.setPeer("B", relay.url);
    await expect(c.forward("B", fwd("A-0"), () => {})).resolves.toMatchObject({ type: "result" });
    expect(kept).toMatch(/^[0-9a-f]{32}$/);

    mode = "strip";
    const c1 = client();
    c1.setPeer("B", relay.url);
    expect(await failure(c1, "A-1")).toEqual(REFUSED_MISSING);

    mode = "replay";
    const c2 = client();
    c2.setPeer("B", relay.url);
    expect(await failure(c2, "A-2")).toEqual(REFUSED_WRONG);
    // The forward frames never went: the server's node saw only the honest channel's forward.
    expect(forwards).toEqual(["A-0"]);

    // A refused channel is not kept: the next forward opens another, which the path now leaves alone.
    mode = "pass";
    await expect(c2.forward("B", fwd("A-3"), () => {})).resolves.toMatchObject({
      type: "result",
      reqId: "A-3",
    });
  });
});

/**
 * A forger on the path that answers the upgrade itself with a tag made by `tagFor` (undefined: none),
 * and, if its 101 is taken, answers forwards with frames sealed as B would (so a taken 101 shows).
 */
async function forger(tagFor: (req: IncomingMessage, accept: string) => string | undefined) {
  const http = createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ server: http, path: CHANNEL_PATH, perMessageDeflate: false });
  const nonces = new WeakMap<IncomingMessage, string>();
  wss.on("headers", (lines: string[], req: IncomingMessage) => {
    nonces.set(req, String(req.headers[HEADER_NONCE]));
    const accept = lines.find((l) => l.startsWith("Sec-WebSocket-Accept: "))?.slice(22) ?? "";
    const tag = tagFor(req, accept);
    if (tag !== undefined) lines.push(`${HEADER_CHANNEL_MAC}: ${tag}`);
  });
  const taken: string[] = [];
  wss.on("connection", (ws: WebSocket, req: IncomingMessage) => {
    const client = String(req.headers[HEADER_SENDER]);
    const mac = frameMac(SECRET, { nonce: nonces.get(req) ?? "", client, server: "B" }, "server");
    ws.on("message", (data: Buffer) => {
      const payload = mac.open(data);
      const f = payload && decodeForwardFrame(payload);
      if (!f?.ok || !f.msg) return;
      taken.push(f.msg.reqId);
      ws.send(mac.seal(encodeRecords([answerRecord.final(f.k, resultFor(f.msg, "forged"))])));
    });
  });
  await new Promise<void>((r) => http.listen(0, "127.0.0.1", r));
  closers.push(() => {
    for (const ws of wss.clients) ws.terminate();
    wss.close();
    http.close();
  });
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, taken };
}

/** The tag B would send, with `edit` applied to what it binds. */
const tagAs =
  (edit: (b: ChannelBinding) => ChannelBinding = (b) => b) =>
  (req: IncomingMessage, accept: string) =>
    channelAcceptTag(
      SECRET,
      edit({
        nonce: String(req.headers[HEADER_NONCE]),
        client: String(req.headers[HEADER_SENDER]),
        server: "B",
      }),
      { accept, extensions: "", protocol: "", signature: String(req.headers[HEADER_SIGNATURE]) },
    );

describe("a 101 answered on the path (shared-secret mode)", () => {
  it("is taken only with the tag B itself would send (the check's control)", async () => {
    const f = await forger(tagAs());
    const c = client();
    c.setPeer("B", f.url);
    await expect(c.forward("B", fwd("A-1"), () => {})).resolves.toMatchObject({ type: "result" });
    expect(f.taken).toEqual(["A-1"]);
  });

  it.each([
    ["no MAC", () => undefined, REFUSED_MISSING],
    [
      "a MAC for another upgrade (wrong nonce)",
      tagAs((b) => ({ ...b, nonce: "x".repeat(32) })),
      REFUSED_WRONG,
    ],
    ["a MAC by another node (wrong node id)", tagAs((b) => ({ ...b, server: "C" })), REFUSED_WRONG],
    ["a MAC for another client", tagAs((b) => ({ ...b, client: "C" })), REFUSED_WRONG],
    ["garbage", () => "not a tag", REFUSED_WRONG],
  ])("with %s is refused before any frame, saying why", async (_what, tagFor, want) => {
    const f = await forger(tagFor);
    const c = client();
    c.setPeer("B", f.url);
    expect(await failure(c, "A-1")).toEqual(want);
    expect(f.taken).toEqual([]);
  });
});

describe("peers that predate the 101's MAC, and the other modes", () => {
  /** B of a build before the 101 MAC: its auth has no sealChannelAccept. */
  const legacyB = (): PeerAuth => {
    const { sealChannelAccept: _, ...rest } = hmacAuth("B", SECRET);
    return rest;
  };

  it("a peer whose hello did not say it seals its 101 is served as before; one not yet checked is refused", async () => {
    const { url, forwards } = await realPeer(legacyB());
    const c = client();
    c.setPeer("B", url);
    // No hello noted yet: nothing says B is of an older build, so the MAC is required.
    expect(await failure(c, "A-1")).toEqual(REFUSED_MISSING);
    c.setChannelAcceptMac("B", false); // its checked hello said nothing of it
    await expect(c.forward("B", fwd("A-2"), () => {})).resolves.toMatchObject({
      type: "result",
      reqId: "A-2",
    });
    expect(forwards).toEqual(["A-2"]);
    // Moving to another address keeps what its hello said.
    c.setPeer("B", `${url}/`);
    await expect(c.forward("B", fwd("A-3"), () => {})).resolves.toMatchObject({ type: "result" });
  });

  it("a peer noted as sealing its 101 that now runs an older build is asked its hello again, then served", async () => {
    // B's hello said it seals its 101; B was then rolled back (or restarted without leaving) to a
    // build before the MAC, or its first hello never came (a static peer down at our start).
    const { url, forwards, hellos } = await realPeer(legacyB());
    const c = client();
    c.setPeer("B", url);
    c.setChannelAcceptMac("B", true);
    expect(await failure(c, "A-1")).toEqual(REFUSED_MISSING);
    await servedSoon(c);
    expect(forwards).toHaveLength(1);
    expect(hellos.n).toBe(1);
  });

  it("a MAC stripped on the path only has the peer's hello read again, which keeps the MAC required", async () => {
    const { url, forwards, hellos } = await realPeer(hmacAuth("B", SECRET));
    const stripped = new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]+`);
    const relay = await onPathUpgradeRelay(url, (head) => head.replace(stripped, ""));
    closers.push(relay.close);
    const c = client();
    c.setPeer("B", relay.url);
    expect(await failure(c, "A-1")).toEqual(REFUSED_MISSING);
    for (const t0 = Date.now(); hellos.n === 0; ) {
      if (Date.now() - t0 > 10_000) throw new Error("timed out: B's hello not asked again");
      await new Promise((r) => setTimeout(r, 20));
    }
    // Its authenticated hello says B seals its 101: still refused, and not asked again meanwhile.
    for (let i = 2; i < 5; i++) expect(await failure(c, `A-${i}`)).toEqual(REFUSED_MISSING);
    expect(hellos.n).toBe(1);
    expect(forwards).toEqual([]);
  });

  it("a peer noted as older that seals a 101 has the MAC required again at once", async () => {
    // B's last hello said nothing of the MAC (an older build); B has since been upgraded.
    const { url, forwards, hellos } = await realPeer(hmacAuth("B", SECRET));
    let strip = true;
    const stripped = new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]+`);
    const relay = await onPathUpgradeRelay(url, (head) => (strip ? head.replace(stripped, "") : head));
    closers.push(relay.close);
    const c = client();
    c.setPeer("B", relay.url);
    c.setChannelAcceptMac("B", false);
    // The control: while B counts as older, a 101 stripped of its MAC is taken unproven.
    await expect(c.forward("B", fwd("A-1"), () => {})).resolves.toMatchObject({ reqId: "A-1" });
    strip = false;
    c.setPeer("B", `${relay.url}/`); // a new channel: B seals its 101, and the MAC checks
    await expect(c.forward("B", fwd("A-2"), () => {})).resolves.toMatchObject({ reqId: "A-2" });
    // Switched back on by the MAC itself: no hello of B was read meanwhile.
    expect(hellos.n).toBe(0);
    strip = true;
    c.setPeer("B", relay.url); // another channel, whose 101 the path strips
    expect(await failure(c, "A-3")).toEqual(REFUSED_MISSING);
    expect(forwards).toEqual(["A-1", "A-2"]);
  });

  it("a peer that moves while its sealed 101 comes has the MAC required at its new address", async () => {
    const { url, forwards } = await realPeer(hmacAuth("B", SECRET));
    let strip = false;
    const stripped = new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]+`);
    const relay = await onPathUpgradeRelay(url, (head) => (strip ? head.replace(stripped, "") : head));
    closers.push(relay.close);
    const c = client();
    c.setPeer("B", relay.url);
    c.setChannelAcceptMac("B", false); // B's last hello was an older build's; it has been upgraded since
    const first = c.forward("B", fwd("A-1"), () => {});
    // B moves while that channel opens: its 101, with B's valid MAC, comes to the channel left behind.
    c.setPeer("B", `${relay.url}/`);
    await expect(first).rejects.toBeInstanceOf(TransportError);
    expect(relay.heads[0]).toMatch(new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]+`));
    strip = true;
    expect(await failure(c, "A-2")).toEqual(REFUSED_MISSING);
    expect(forwards).toEqual([]);
  });

  it("an older peer's 101 that does carry a MAC is still checked", async () => {
    const f = await forger(tagAs((b) => ({ ...b, server: "C" })));
    const c = client();
    c.setPeer("B", f.url);
    c.setChannelAcceptMac("B", false);
    expect(await failure(c, "A-1")).toEqual(REFUSED_WRONG);
  });

  it("insecure mode neither sends nor checks one (mTLS: TLS pinned to B's certificate proves its 101)", async () => {
    const { url, forwards } = await realPeer(insecureAuth("B"));
    const relay = await onPathUpgradeRelay(url);
    closers.push(relay.close);
    const c = client(insecureAuth("A"));
    c.setPeer("B", relay.url);
    await expect(c.forward("B", fwd("A-1"), () => {})).resolves.toMatchObject({ type: "result" });
    expect(forwards).toEqual(["A-1"]);
    expect(relay.heads[0]).not.toContain(HEADER_CHANNEL_MAC);
  });
});
