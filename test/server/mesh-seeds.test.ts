/** `--join`: seed addresses parsed into peer URLs, bad ones refused with a message naming them. */

import pino from "pino";
import { describe, expect, it } from "vitest";
import { MAX_JOIN, parseJoin } from "../../src/server/runtime/mesh-seeds.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { modelOf, postCompletion } from "../api-client.js";
import { waitFor } from "../e2e/helpers.js";

const settings = (o: Record<string, unknown>) =>
  resolveNodeSettings(
    { id: "A", engine: "sim", logLevel: "silent", listen: "127.0.0.1:0", peerListen: "127.0.0.1:0", ...o },
    {},
  );
const logger = pino({ level: "silent" });

describe("--join", () => {
  it("turns HOST:PORT seeds (a string or a YAML list) into peer URLs of the cluster's scheme, deduplicated", () => {
    expect(parseJoin("10.0.0.2:9080, seed.local:9080,10.0.0.2:9080", "https")).toEqual([
      "https://10.0.0.2:9080",
      "https://seed.local:9080",
    ]);
    expect(parseJoin(["[::1]:9080"], "http")).toEqual(["http://[::1]:9080"]);
    expect(parseJoin(undefined, "http")).toEqual([]);
    expect(parseJoin("", "http")).toEqual([]);
  });

  it("refuses what is not HOST:PORT, port 0 or above 65535, and too many seeds", () => {
    expect(() => parseJoin("http://a:1", "http")).toThrow(/must be HOST:PORT/);
    expect(() => parseJoin("a", "http")).toThrow(/'a' must be HOST:PORT/);
    expect(() => parseJoin("a:0", "http")).toThrow(/HOST:PORT/);
    expect(() => parseJoin("a:70000", "http")).toThrow(/HOST:PORT/);
    const many = Array.from({ length: MAX_JOIN + 1 }, (_, i) => `h${i}:1`).join(",");
    expect(() => parseJoin(many, "http")).toThrow(/at most 64/);
  });

  it("is refused without --gossip scuttlebutt", async () => {
    const full = settings({ join: "127.0.0.1:1", insecure: true, gossip: "full" });
    await expect(startNode(full, { logger })).rejects.toThrow(/--join needs --gossip scuttlebutt/);
    // Seeds without credentials (or --insecure): an unauthenticated cluster.
    await expect(
      startNode(settings({ gossip: "scuttlebutt", join: "127.0.0.1:1" }), { logger }),
    ).rejects.toThrow(/without peer authentication/);
  });
});

describe("a lone scuttlebutt node without credentials (no seeds, no peers)", () => {
  it("starts, warns once, and admits no member that tries to join through it", async () => {
    const warnings: string[] = [];
    const recording = pino({ level: "warn" }, { write: (line: string) => void warnings.push(line) });
    const a = await startNode(settings({ gossip: "scuttlebutt" }), { logger: recording });
    let b: Awaited<ReturnType<typeof startNode>> | undefined;
    try {
      expect(warnings.filter((w) => /no peer authentication/.test(w))).toHaveLength(1);
      // B (insecure) names A as its seed: A cannot check B's credential, so it never admits B.
      const seed = new URL(a.peerUrl).host;
      b = await startNode(settings({ id: "B", gossip: "scuttlebutt", insecure: true, join: seed }), {
        logger,
      });
      await waitFor(
        async () =>
          /prefixmesh_peer_auth_rejected_total\{[^}]*reason="mesh-verify"[^}]*\} [1-9]/.test(
            await (await fetch(`${a.apiUrl}/metrics`)).text(),
          ),
        15_000,
        "A to refuse B's join",
      );
      const peers = async (n: { apiUrl: string }) =>
        ((await (await fetch(`${n.apiUrl}/cluster`)).json()) as { peers: unknown[] }).peers;
      expect(await peers(a)).toEqual([]);
      // Still alone: it serves its own clients.
      const model = await modelOf(a.apiUrl);
      expect((await postCompletion(a.apiUrl, { model, prompt: "alone", max_tokens: 1 })).status).toBe(200);
      expect(warnings.filter((w) => /no peer authentication/.test(w))).toHaveLength(1);
    } finally {
      await Promise.all([a.stop(), b?.stop()]);
    }
  });

  it("with --insecure is a seed others join through (members verified without credentials)", async () => {
    const a = await startNode(settings({ gossip: "scuttlebutt", insecure: true }), { logger });
    let b: Awaited<ReturnType<typeof startNode>> | undefined;
    try {
      b = await startNode(
        settings({ id: "B", gossip: "scuttlebutt", insecure: true, join: new URL(a.peerUrl).host }),
        { logger },
      );
      const holds = (n: { runtime: { clusterView(): unknown } }, id: string) =>
        (n.runtime.clusterView() as { peers: { id: string }[] }).peers.some((p) => p.id === id);
      const nb = b;
      await waitFor(() => holds(a, "B") && holds(nb, "A"), 15_000, "A and B to become members of each other");
    } finally {
      await Promise.all([a.stop(), b?.stop()]);
    }
  });
});
