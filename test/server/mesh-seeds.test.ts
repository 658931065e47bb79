/** `--join`: seed addresses parsed into peer URLs, bad ones refused with a message naming them. */

import pino from "pino";
import { describe, expect, it } from "vitest";
import { MAX_JOIN, parseJoin } from "../../src/server/runtime/mesh-seeds.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

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

  it("is refused without --gossip scuttlebutt, and a scuttlebutt node needs authentication even alone", async () => {
    const full = settings({ join: "127.0.0.1:1", insecure: true, gossip: "full" });
    await expect(startNode(full, { logger })).rejects.toThrow(/--join needs --gossip scuttlebutt/);
    // Anyone may join through a scuttlebutt node: without credentials it is an unauthenticated cluster.
    await expect(startNode(settings({ gossip: "scuttlebutt" }), { logger })).rejects.toThrow(
      /without peer authentication/,
    );
  });
});
