/**
 * A node's hello says its SWIM incarnation (admin.ts), and a check of a member's new life hands the
 * member's own word to SWIM (mesh-verify.ts → `member-verified`), which holds it there rather than
 * at a relay's claim (core swim/own-word.ts). A hello without it (an older node) answers as before;
 * a fresh process says none until a member's list has answered its own (core swim.ts `saidIncarnation`).
 */
import { describe, expect, it } from "vitest";
import type { Engine } from "../../src/core/engine.js";
import { PrefixNode } from "../../src/core/node/node.js";
import type { NodeInput } from "../../src/core/node/types.js";
import { checkPeerHello } from "../../src/net/discovery.js";
import type { PeerClient } from "../../src/net/transport-client.js";
import { Admin } from "../../src/server/runtime/admin.js";
import { QUIET_LOGGER, verificationOver } from "./mesh-fakes.js";

const BOOT_MS = 1_700_000_000_123;

/** A real node booted at BOOT_MS under `gossip`, and its hello. */
function booted(gossip: "full" | "scuttlebutt") {
  const node = new PrefixNode(
    { id: "A", peers: [], gossip, capacityTokens: 1_000 },
    { now: () => BOOT_MS, random: () => 0.5 },
  );
  const admin = new Admin({
    node,
    engine: { info: { model: "m", needsPromptText: true } } as unknown as Engine,
    client: { authMode: "insecure" } as unknown as PeerClient,
    logger: QUIET_LOGGER,
    clusterId: "c",
    peerUrls: new Map(),
  });
  return { node, hello: () => admin.hello() };
}

function helloOf(gossip: "full" | "scuttlebutt") {
  return booted(gossip).hello();
}

/** A's verification of B, whose hello (proven B's) is `hello`; what it fed SWIM. */
async function verifiedWith(hello: Record<string, unknown>): Promise<NodeInput> {
  const { v, fed } = verificationOver(() => Promise.resolve(hello));
  v.verify("B");
  const deadline = Date.now() + 10_000;
  while (fed.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  v.stop();
  expect(fed).toHaveLength(1);
  return fed[0] as NodeInput;
}

const B = { id: "B", cluster: "c", model: "m", protocol: 5, minProtocol: 3, gossip: "scuttlebutt" };

describe("the hello's incarnation", () => {
  it("a SWIM node says its incarnation once a member's list answered its own; a full-mesh node none", () => {
    const { node, hello } = booted("scuttlebutt");
    node.start();
    // Fresh: what the cluster holds of its previous life is unheard yet, so its boot value says nothing.
    expect(hello()).not.toHaveProperty("incarnation");
    const swim = (from: string, msg: unknown) =>
      node.handle({ type: "mesh-message", from, msg: { channel: "swim", msg } } as NodeInput);
    swim("x", { type: "gossip", updates: [{ id: "C", status: "alive", incarnation: 0 }] });
    node.handle({ type: "member-verified", id: "C", ok: true, incarnation: 0 });
    // Member C's list holds A's previous life above A's boot: A outbids it by two, and says so.
    swim("C", {
      type: "sync",
      reply: false,
      members: [{ id: "A", status: "alive", incarnation: BOOT_MS + 500 }],
    });
    expect(hello().incarnation).toBe(BOOT_MS + 502);
    expect(
      checkPeerHello({ cluster: "c", model: undefined, self: "Z", authMode: "insecure" }, hello()).ok,
    ).toBe(true);
    expect(helloOf("full")).not.toHaveProperty("incarnation");
  });

  it("a member's check hands its own incarnation to SWIM with the yes", async () => {
    expect(await verifiedWith({ ...B, incarnation: 4_242 })).toEqual({
      type: "member-verified",
      id: "B",
      ok: true,
      incarnation: 4_242,
    });
  });

  it("an older node's hello, without one, answers yes as before, with none", async () => {
    expect(await verifiedWith(B)).toEqual({ type: "member-verified", id: "B", ok: true });
  });

  it("a hello whose incarnation is no safe non-negative integer is malformed, refused", async () => {
    for (const bad of [-1, 1.5, "7", Number.MAX_SAFE_INTEGER + 2]) {
      const fed = await verifiedWith({ ...B, incarnation: bad });
      expect(fed, String(bad)).toMatchObject({ type: "member-verified", id: "B", ok: false });
      expect(fed).not.toHaveProperty("incarnation");
      expect((fed as { reason?: string }).reason).toMatch(/^malformed: .*incarnation/);
    }
  });
});
