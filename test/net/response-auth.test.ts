/**
 * Shared-secret mode against an on-path attacker of answers: a forward's ack epoch, its streamed
 * records, and the whole answers of hello and messages are the serving node's answer to that one
 * request. Altered, added, dropped or replayed from another request or node, the answer is refused
 * as garbled (a `protocol` TransportError: the runtime falls back), and no altered text reaches the
 * caller; the honest path through the same relay keeps working.
 */
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { HEADER_RESPONSE_MAC } from "../../src/net/auth/response-mac.js";
import { EPOCH_HEADER } from "../../src/net/forward-wire.js";
import type { PeerServerHandlers } from "../../src/net/peer-handlers.js";
import { hmacAuth, insecureAuth } from "../../src/net/transport-auth.js";
import { PeerClient, TransportError } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { refusedNow, UNAUTHENTICATED_TRIES } from "../../src/server/runtime/peer-refusal.js";
import { fwd, resultFor, SECRET } from "./fixtures.js";
import { type Answer, editRecord, onPathRelay } from "./on-path-relay.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

/**
 * A peer server for `self` whose node acks each forward in epoch 7, then streams "he", "llo"
 * ("v2-hmac": a node of protocol 2, which signs requests but not its answers).
 */
async function node(self: string, mode: "hmac" | "insecure" | "v2-hmac" = "hmac") {
  const handlers: PeerServerHandlers = {
    hello: () => ({
      id: self,
      cluster: "c1",
      model: "m",
      protocol: mode === "v2-hmac" ? 2 : PROTOCOL_VERSION,
    }),
    isKnownPeer: (id) => id === "A",
    onMessage() {},
    onForward(_from, msg, reply) {
      reply.ack(7);
      reply.chunk("he");
      reply.chunk("llo");
      reply.finish(resultFor(msg, "hello", self));
    },
  };
  const auth =
    mode === "insecure"
      ? insecureAuth(self)
      : mode === "hmac"
        ? hmacAuth(self, SECRET)
        : { ...hmacAuth(self, SECRET), responseSealer: () => undefined };
  const server: FastifyInstance = buildPeerServer({ auth, handlers });
  cleanups.push(() => server.close());
  return server.listen({ host: "127.0.0.1", port: 0 });
}

/** Node A's client reaching `id` at `url`, forwards over HTTP. */
function clientA(peers: Record<string, string>, mode: "hmac" | "insecure" | "v2-hmac" = "hmac") {
  const auth =
    mode === "insecure"
      ? insecureAuth("A")
      : mode === "hmac"
        ? hmacAuth("A", SECRET)
        : { ...hmacAuth("A", SECRET), responseOpener: () => undefined };
  const c = new PeerClient({ auth, forwardTransport: "http" });
  cleanups.push(() => c.close());
  for (const [id, url] of Object.entries(peers)) c.setPeer(id, url);
  return c;
}

/** A's relay to `target`, each answer passed through `tamper`. */
async function relayTo(target: string, tamper?: (a: Answer) => Answer) {
  const r = await onPathRelay(target, tamper);
  cleanups.push(() => r.close());
  return r;
}

/** Forwards `reqId` to `id`; what the caller saw: acks, chunks, and the result or the error. */
async function forwardTo(c: PeerClient, id: string, reqId = "A-1") {
  const acks: (number | undefined)[] = [];
  const chunks: string[] = [];
  try {
    const reply = await c.forward(
      id,
      fwd(reqId),
      (t) => chunks.push(t),
      (e) => acks.push(e),
    );
    return { acks, chunks, reply, error: undefined };
  } catch (error) {
    return { acks, chunks, reply: undefined, error: error as TransportError };
  }
}

const isForward = (a: Answer) => a.path === "/peer/forward";

describe("shared-secret answers on the path", () => {
  it("passes an untouched answer through the relay: ack epoch, chunks, result", async () => {
    const relay = await relayTo(await node("B"));
    const r = await forwardTo(clientA({ B: relay.url }), "B");
    expect(r.error).toBeUndefined();
    expect(r.acks).toEqual([7]);
    expect(r.chunks).toEqual(["he", "llo"]);
    expect(r.reply).toMatchObject({ type: "result", result: { text: "hello" } });
    // It was authenticated, not merely passed: the head carries its MAC, each record a tag.
    const a = relay.answers.find(isForward)!;
    expect(a.headers[HEADER_RESPONSE_MAC]).toMatch(/^[0-9a-f]{32}$/);
    expect(a.body.toString().split("\n").filter(Boolean)).toHaveLength(3);
    for (const line of a.body.toString().split("\n").filter(Boolean))
      expect(line).toMatch(/^[0-9a-f]{32} \{/);
  });

  it.each([
    ["altered", (h: Record<string, string>) => ({ ...h, [EPOCH_HEADER]: "8" })],
    ["dropped", ({ [EPOCH_HEADER]: _, ...h }: Record<string, string>) => h],
    ["added beside it", (h: Record<string, string>) => ({ ...h, "x-prefixmesh-served": "9" })],
    ["left without its MAC", ({ [HEADER_RESPONSE_MAC]: _, ...h }: Record<string, string>) => h],
  ])("refuses a forward's ack whose epoch header was %s, before acking", async (_, edit) => {
    const relay = await relayTo(await node("B"), (a) =>
      isForward(a) ? { ...a, headers: edit(a.headers) } : a,
    );
    const r = await forwardTo(clientA({ B: relay.url }), "B");
    expect(r.error).toBeInstanceOf(TransportError);
    expect(r.error?.kind).toBe("protocol");
    expect(r.acks).toEqual([]);
    expect(r.chunks).toEqual([]);
  });

  it.each([
    ["a chunk altered", (a: Answer) => editRecord(a, /"text":"llo"/, (j) => j.replace("llo", "LLO"))],
    [
      "the final record altered",
      (a: Answer) => editRecord(a, /"t":"msg"/, (j) => j.replace('"text":"hello"', '"text":"HELLO"')),
    ],
    [
      "a chunk dropped",
      (a: Answer) => ({ ...a, body: Buffer.from(a.body.toString().replace(/^[^\n]*"llo"[^\n]*\n/m, "")) }),
    ],
    [
      "the records swapped",
      (a: Answer) => {
        const [x, y, z] = a.body.toString().split("\n");
        return { ...a, body: Buffer.from([y, x, z, ""].join("\n")) };
      },
    ],
    [
      "a record injected",
      (a: Answer) => ({
        ...a,
        body: Buffer.concat([Buffer.from(`${"0".repeat(32)} {"t":"chunk","text":"X"}\n`), a.body]),
      }),
    ],
  ])("refuses a forward's stream with %s, and passes on no altered text", async (_, edit) => {
    const relay = await relayTo(await node("B"), (a) => (isForward(a) ? edit(a) : a));
    const r = await forwardTo(clientA({ B: relay.url }), "B");
    expect(r.error).toBeInstanceOf(TransportError);
    expect(r.error?.kind).toBe("protocol");
    expect(r.reply).toBeUndefined();
    // What got through was the sender's, in its order: a prefix of the true chunks.
    expect(["he", "llo"].slice(0, r.chunks.length)).toEqual(r.chunks);
  });

  it("refuses a forward's answer replayed from another request, or moved from another node", async () => {
    const b = await node("B");
    const cNode = await node("C");
    // The attacker answers each forward with the first forward answer it saw (A-1's, from B).
    let first: Answer | undefined;
    const keep = (a: Answer) => {
      if (!isForward(a)) return a;
      first ??= a;
      return { ...first, n: a.n };
    };
    const toB = await relayTo(b, keep);
    const toC = await relayTo(cNode, keep);
    const c = clientA({ B: toB.url, C: toC.url });
    expect((await forwardTo(c, "B", "A-1")).reply).toMatchObject({ result: { text: "hello" } });
    for (const [id, reqId] of [
      ["B", "A-2"],
      ["C", "A-3"],
    ] as const) {
      const r = await forwardTo(c, id, reqId);
      expect(r.error?.kind).toBe("protocol");
      expect(r.acks).toEqual([]);
    }
    // Both were served: only the answers were swapped.
    expect(toB.answers.filter(isForward)).toHaveLength(2);
    expect(toC.answers.filter(isForward)).toHaveLength(1);
  });

  it("refuses a hello or a message answer altered or replayed from another request", async () => {
    const b = await node("B");
    let hello: Answer | undefined;
    let mode: "honest" | "alter" | "replay" = "honest";
    const relay = await relayTo(b, (a) => {
      if (a.path === "/peer/hello") hello ??= a;
      if (mode === "alter" && a.path === "/peer/hello")
        return { ...a, body: Buffer.from(a.body.toString().replace('"c1"', '"c9"')) };
      if (mode === "replay") return { ...hello!, n: a.n };
      return a;
    });
    const c = clientA({ B: relay.url });
    expect(await c.hello("B")).toMatchObject({ id: "B", cluster: "c1" });
    expect((await c.probeHello(relay.url)).hello).toMatchObject({ id: "B" });
    await c.send("B", { type: "goodbye" });
    mode = "alter";
    await expect(c.hello("B")).rejects.toMatchObject({ kind: "protocol" });
    await expect(c.probeHello(relay.url)).rejects.toMatchObject({ kind: "protocol" });
    mode = "replay";
    await expect(c.hello("B")).rejects.toMatchObject({ kind: "protocol" });
    await expect(c.send("B", { type: "goodbye" })).rejects.toMatchObject({ kind: "protocol" });
  });

  it("changes nothing in insecure mode: no MAC is sent or asked for", async () => {
    const relay = await relayTo(await node("B", "insecure"));
    const r = await forwardTo(clientA({ B: relay.url }, "insecure"), "B");
    expect(r.reply).toMatchObject({ result: { text: "hello" } });
    expect(r.acks).toEqual([7]);
    expect(relay.answers.find(isForward)!.headers[HEADER_RESPONSE_MAC]).toBeUndefined();
    expect(relay.answers.find(isForward)!.body.toString()).toMatch(/^\{"t":"chunk"/);
  });

  it("keeps protocols 2 and 3 apart: each side refuses the other, saying why", async () => {
    const v2 = await node("B", "v2-hmac");
    const v3 = await node("C");
    // A protocol 3 node cannot trust an old node's answers, and says it may be an older one.
    const c3 = clientA({ B: v2 });
    await expect(c3.hello("B")).rejects.toThrow(/no response MAC \(a peer older than protocol 3/);
    expect((await forwardTo(c3, "B")).error?.kind).toBe("protocol");
    // A protocol 2 node reads a protocol 3 hello (the MAC is a header it ignores): it says 3, which
    // that node's checkPeerHello, comparing with its own 2, refuses ("wrong-protocol").
    const c2 = clientA({ C: v3 }, "v2-hmac");
    expect(await c2.hello("C")).toMatchObject({ id: "C", protocol: 3 });
    expect(PROTOCOL_VERSION).toBe(3);
  });
});

describe("shared-secret refusals on the path: only a sealed one is the peer's", () => {
  const forged = (status: number) => (a: Answer) => ({
    ...a,
    status,
    headers: { "content-type": "application/json" },
    body: Buffer.from('{"error":"forged"}'),
  });

  it("a forged 403 to a hello is an unauthenticated refusal, not taken at the first try", async () => {
    const honest = await relayTo(await node("H"));
    const r = await relayTo(await node("B"), (a) => (a.path === "/peer/hello" ? forged(403)(a) : a));
    const c = clientA({ B: r.url, H: honest.url });
    const err = await c.hello("B").catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: "http", status: 403, unauthenticated: true });
    expect(refusedNow(err, 0)).toBe(false);
    expect(refusedNow(err, UNAUTHENTICATED_TRIES - 1)).toBe(true);
    // The honest hello through a relay carries its MAC and is taken.
    await expect(c.hello("H")).resolves.toMatchObject({ id: "H" });
    expect(honest.answers[0]?.headers[HEADER_RESPONSE_MAC]).toMatch(/^[0-9a-f]{32}$/);
  });

  it("a forged refusal of a forward is unauthenticated; an altered 200 is no definite refusal either", async () => {
    const refused = await relayTo(await node("B"), (a) => (isForward(a) ? forged(503)(a) : a));
    const got = await forwardTo(clientA({ B: refused.url }), "B");
    expect(got.error).toMatchObject({ kind: "http", status: 503, unauthenticated: true });
    const altered = await relayTo(await node("B"), (a) =>
      a.path === "/peer/hello" ? { ...a, body: Buffer.from(a.body.toString().replace('"m"', '"x"')) } : a,
    );
    const err = await clientA({ B: altered.url })
      .hello("B")
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: "protocol", unauthenticated: true });
    expect(refusedNow(err, 0)).toBe(false);
  });

  it("a refusal of an authenticated request is sealed: the peer's own, taken as such", async () => {
    // No mesh handler: the node refuses /peer/mesh (404) after authenticating the request.
    const c = clientA({ B: await node("B") });
    const err = await c.sendMesh("B", new Uint8Array(4)).catch((e: unknown) => e);
    expect(err).toMatchObject({ kind: "http", status: 404, unauthenticated: false });
  });
});
