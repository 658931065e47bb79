/**
 * A real peer port's own 404 (a route its build does not have, or gossip it does not run) is a
 * protocol mismatch between members, not a wrong address: it must not be said as "no peer port".
 */
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import type { PeerServerHandlers } from "../../src/net/peer-handlers.js";
import { hmacAuth, insecureAuth } from "../../src/net/transport-auth.js";
import { PeerClient, TransportError } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { wrongPortAnswer } from "../../src/net/wrong-port.js";
import { SECRET } from "./fixtures.js";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

/** Peer B's port, a node that runs no gossip scuttlebutt (no `onMesh`: its mesh path is a 404). */
async function peerB(mode: "hmac" | "insecure"): Promise<string> {
  const handlers: PeerServerHandlers = {
    hello: () => ({ id: "B", cluster: "c1", model: "m", protocol: PROTOCOL_VERSION }),
    isKnownPeer: (id) => id === "A",
    onMessage() {},
    onForward() {},
  };
  const server: FastifyInstance = buildPeerServer({
    auth: mode === "hmac" ? hmacAuth("B", SECRET) : insecureAuth("B"),
    handlers,
  });
  cleanups.push(() => server.close());
  return server.listen({ host: "127.0.0.1", port: 0 });
}

describe("a peer port's own 404", () => {
  const body = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

  it("is no wrong port: the peer port's refusal shape", () => {
    expect(wrongPortAnswer(404, body({ error: "no such peer endpoint" }))).toBeUndefined();
    expect(
      wrongPortAnswer(404, body({ error: "this node does not run gossip scuttlebutt" })),
    ).toBeUndefined();
  });

  for (const mode of ["hmac", "insecure"] as const) {
    it(`is a plain 404, not a wrong address (${mode})`, async () => {
      const url = await peerB(mode);
      const c = new PeerClient({ auth: mode === "hmac" ? hmacAuth("A", SECRET) : insecureAuth("A") });
      cleanups.push(() => c.close());
      c.setPeer("B", url);
      const err = await c.sendMesh("B", new Uint8Array([1])).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(TransportError);
      const t = err as TransportError;
      expect(t.status).toBe(404);
      expect(t.wrongAddress).toBe(false);
      expect(t.message).not.toMatch(/no prefixmesh peer port|not as a peer port/);
      expect(t.message).toMatch(/does not run gossip scuttlebutt/);
    });
  }
});
