/**
 * Two in-process nodes in shared-secret mode, forwards on the channel (the default): A reaches B
 * through an on-path TCP relay. Untouched, B's 101 answer carries its channel MAC and B serves the
 * forward; with the MAC stripped on the path, A refuses the channel before any frame, counts it with
 * the authentication refusals, and falls back: the client is still answered (by A).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Engine } from "../../src/core/engine.js";
import type { PrefixNode } from "../../src/core/node/node.js";
import { HEADER_CHANNEL_MAC } from "../../src/net/auth/channel-mac.js";
import { writeSecretFile } from "../../src/net/auth/secret.js";
import type { PeerClient } from "../../src/net/transport-client.js";
import { Admin } from "../../src/server/runtime/admin.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { postCompletion } from "../api-client.js";
import { onPathUpgradeRelay } from "../net/on-path-relay.js";
import { routedPair } from "./helpers.js";

describe("shared-secret forward channel through an on-path relay", () => {
  const dir = mkdtempSync(join(tmpdir(), "prefixmesh-acceptmac-"));
  const nodes: NodeHandle[] = [];
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    await Promise.all(closers.map((c) => c()));
    await Promise.all(nodes.map((n) => n.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it("is served by B with B's 101, and falls back to A when the 101's MAC is stripped", async () => {
    const secretFile = join(dir, "secret");
    await writeSecretFile(secretFile);
    const prefix = Array.from({ length: 300 }, (_, i) => `accept${i}`).join(" ");
    const { a, model } = await routedPair(
      prefix,
      {},
      { extra: { insecure: false, secretFile }, onStart: (...n) => nodes.push(...n) },
    );
    const bPeer = a.runtime.admin.peerUrl("B")!;
    const honest = await onPathUpgradeRelay(bPeer);
    const stripped = new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]+`);
    const forger = await onPathUpgradeRelay(bPeer, (head) => head.replace(stripped, ""));
    closers.push(honest.close, forger.close);

    const ask = async (q: string) => {
      const res = await postCompletion(a.apiUrl, { model, prompt: `${prefix} ${q}`, max_tokens: 4 });
      expect(res.status).toBe(200);
      return res.headers.get("x-prefixmesh-served-by");
    };
    const refusals = async () => {
      const text = await (await fetch(`${a.apiUrl}/metrics`)).text();
      const line = text
        .split("\n")
        .find(
          (l) =>
            l.startsWith("prefixmesh_peer_auth_rejected_total{") && l.includes('reason="channel-accept"'),
        );
      return line === undefined ? 0 : Number(line.split(" ").at(-1));
    };

    a.runtime.admin.movePeer("B", honest.url); // a new channel, opened through the relay
    expect(await ask("first")).toBe("B");
    expect(honest.heads.some((h) => h.startsWith("HTTP/1.1 101") && stripped.test(h))).toBe(true);
    expect(await refusals()).toBe(0);

    a.runtime.admin.movePeer("B", forger.url);
    expect(await ask("second")).toBe("A"); // B's channel refused: A ran it itself
    expect(forger.heads.some((h) => h.startsWith("HTTP/1.1 101"))).toBe(true);
    expect(await refusals()).toBeGreaterThanOrEqual(1);
  });
});

describe("what hellos say of the 101's MAC", () => {
  const admin = (authMode: "hmac" | "mtls", noted: [string, boolean][] = []) =>
    new Admin({
      node: {
        id: "A",
        config: { gossip: "scuttlebutt" },
        localTree: () => ({ capacity: 1024 }),
        meshIncarnation: () => 0,
        peerModels: new Map(),
        capPeerEstimate() {},
      } as unknown as PrefixNode,
      engine: { info: { model: "m", needsPromptText: true } } as unknown as Engine,
      client: {
        authMode,
        setPromptText() {},
        setChannelAcceptMac: (id: string, sealed: boolean) => void noted.push([id, sealed]),
      } as unknown as PeerClient,
      logger: { info() {}, warn() {}, error() {}, debug() {} },
      clusterId: "c",
      peerUrls: new Map(),
    });

  it("a shared-secret node says it seals its 101; an mTLS node, which needs no such MAC, does not", () => {
    expect(admin("hmac").hello()).toMatchObject({ channelAcceptMac: true });
    expect(admin("mtls").hello()).not.toHaveProperty("channelAcceptMac");
  });

  it("only a hello that says so makes the MAC optional for its peer; no hello leaves it required", () => {
    const noted: [string, boolean][] = [];
    const a = admin("hmac", noted);
    a.notePeerHello("B", { model: "m" }); // a build before the MAC
    a.notePeerHello("C", { model: "m", channelAcceptMac: true });
    a.notePeerHello("D", {}); // no hello known: nothing noted, so the client keeps requiring it
    expect(noted).toEqual([
      ["B", false],
      ["C", true],
    ]);
  });
});
