/**
 * `ForwardChannel.release()` (connected-peers.ts asks it for peers past the bound) against a forward
 * that has opened the connection but not yet put its stream on it: the connection must stay.
 */
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { ForwardChannel } from "../../src/net/channel-client.js";
import type { PeerServerHandlers } from "../../src/net/peer-handlers.js";
import { insecureAuth } from "../../src/net/transport-auth.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { fwd, resultFor } from "./fixtures.js";

const servers: FastifyInstance[] = [];
const channels: ForwardChannel[] = [];
afterEach(async () => {
  for (const ch of channels.splice(0)) ch.close();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function peer(): Promise<string> {
  const handlers: PeerServerHandlers = {
    hello: () => ({ id: "B", cluster: "c1", model: "m", protocol: PROTOCOL_VERSION }),
    isKnownPeer: () => true,
    onMessage() {},
    onForward: (_from, msg, reply) => reply.finish(resultFor(msg, msg.reqId)),
  };
  const server = buildPeerServer({ auth: insecureAuth("B"), handlers });
  servers.push(server);
  return server.listen({ host: "127.0.0.1", port: 0 });
}

const timeouts = { connectMs: 5_000, firstByteMs: 5_000, gapMs: 5_000, forwardTotalMs: 10_000 };

describe("ForwardChannel.release", () => {
  it("refuses between the connection opening and the forward that opened it registering its stream", async () => {
    const ch = new ForwardChannel("B", await peer(), insecureAuth("A"), timeouts);
    channels.push(ch);
    // `open()`'s promise settles (and its `.finally` clears `opening`) before the awaiting forward
    // resumes: a reaction chained on it here runs in that window, as a PeerClient use of another
    // peer can.
    const inner = ch as unknown as { open: () => Promise<unknown> };
    const open = inner.open.bind(ch);
    let released: boolean | undefined;
    inner.open = () => {
      const p = open();
      void p.then(() => {
        released = ch.release();
      });
      return p;
    };
    const reply = await ch.forward(fwd("A-1"), () => {});
    expect(released).toBe(false);
    expect(reply).toMatchObject({ type: "result", reqId: "A-1" });
    // Once the forward is answered, nothing holds the connection.
    expect(ch.release()).toBe(true);
  });
});
