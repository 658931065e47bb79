/**
 * The cancel message and the forward deadline on the real transport: validated, bounded, optional
 * (an older peer's forward without a deadline still parses), and delivered over HTTP.
 */
import type { FastifyInstance } from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { forwardFromWire, forwardToWire } from "../../src/net/forward-wire.js";
import { insecureAuth } from "../../src/net/transport-auth.js";
import { PeerClient } from "../../src/net/transport-client.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import { type ForwardMsg, type LoneMessage, PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { forwardWireSchema, messageWireSchema } from "../../src/net/wire-schemas.js";

const fwd = (deadlineMs?: number): ForwardMsg => ({
  type: "forward",
  reqId: "A-1",
  attempt: 2,
  hops: 1,
  request: { id: "A-1", tokens: Uint32Array.from([1, 2, 3]), maxTokens: 1 },
  ...(deadlineMs !== undefined ? { deadlineMs } : {}),
});

const wire = (m: ForwardMsg): unknown => JSON.parse(JSON.stringify(forwardToWire(m)));

describe("cancel + deadline wire format", () => {
  it("round-trips a forward's deadline, and parses one without (older peers)", () => {
    const withDeadline = forwardWireSchema.parse(wire(fwd(29_500)));
    expect(forwardFromWire(withDeadline).deadlineMs).toBe(29_500);
    const without = forwardWireSchema.parse(wire(fwd()));
    expect(forwardFromWire(without)).not.toHaveProperty("deadlineMs");
  });

  it("refuses a negative or huge deadline", () => {
    for (const d of [-1, 1e12]) {
      const w = { ...(wire(fwd()) as object), deadlineMs: d };
      expect(forwardWireSchema.safeParse(w).success).toBe(false);
    }
  });

  it("accepts a cancel and bounds its fields", () => {
    expect(messageWireSchema.parse({ type: "cancel", reqId: "A-1", attempt: 3 })).toEqual({
      type: "cancel",
      reqId: "A-1",
      attempt: 3,
    });
    expect(messageWireSchema.safeParse({ type: "cancel", reqId: "x".repeat(300), attempt: 1 }).success).toBe(
      false,
    );
    expect(messageWireSchema.safeParse({ type: "cancel", reqId: "A-1" }).success).toBe(false);
  });

  describe("over HTTP", () => {
    let server: FastifyInstance | undefined;
    let client: PeerClient | undefined;
    afterEach(async () => {
      await client?.close();
      await server?.close();
    });

    it("delivers a cancel to the node's message handler", async () => {
      const got: { from: string; msg: LoneMessage }[] = [];
      server = buildPeerServer({
        auth: insecureAuth("B"),
        handlers: {
          hello: () => ({ id: "B", cluster: "c", model: "m", protocol: PROTOCOL_VERSION }),
          isKnownPeer: () => true,
          onForward: () => {},
          onMessage: (from, msg) => got.push({ from, msg }),
        },
      });
      const url = await server.listen({ host: "127.0.0.1", port: 0 });
      client = new PeerClient({ auth: insecureAuth("A") });
      client.setPeer("B", url);
      await client.send("B", { type: "cancel", reqId: "A-1", attempt: 2 });
      expect(got).toEqual([{ from: "A", msg: { type: "cancel", reqId: "A-1", attempt: 2 } }]);
    });
  });
});

describe("the cancel frame on the forward channel", () => {
  it("decodes as a cancel of its stream; one with tokens or a bad stream number does not", async () => {
    const { decodeForwardFrame, encodeCancelFrame } = await import("../../src/net/forward-frame.js");
    expect(decodeForwardFrame(encodeCancelFrame(7))).toEqual({
      ok: true,
      k: 7,
      msg: undefined,
      cancel: true,
    });
    // A final cancel (abort-runs.ts) says so; a plain one stays as older peers send it.
    expect(decodeForwardFrame(encodeCancelFrame(7, true))).toEqual({
      ok: true,
      k: 7,
      msg: undefined,
      cancel: true,
      final: true,
    });
    expect(JSON.parse(encodeCancelFrame(7).subarray(4).toString())).toEqual({ t: "cancel", k: 7 });
    const final = { type: "cancel", reqId: "A-1", attempt: 2, final: true };
    expect(messageWireSchema.parse(final)).toEqual(final);
    expect(messageWireSchema.safeParse({ ...final, final: false }).success).toBe(false);
    const withTokens = Buffer.concat([encodeCancelFrame(7), Buffer.alloc(4)]);
    expect(decodeForwardFrame(withTokens).ok).toBe(false);
    const meta = Buffer.from(JSON.stringify({ t: "cancel", k: -1 }));
    const bad = Buffer.concat([Buffer.from([0, 0, 0, meta.length]), meta]);
    expect(decodeForwardFrame(bad)).toMatchObject({ ok: false, k: undefined });
  });
});
