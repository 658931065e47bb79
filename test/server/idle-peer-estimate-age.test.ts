/**
 * Under gossip "scuttlebutt" an idle member sends no new state (its tree does not change), yet its
 * digests keep naming the version we hold: its estimate is current, and `/cluster`'s estimateAgeMs (the
 * dashboard's "last heard", prefixmesh_peer_estimate_age_seconds) must not grow as if it went silent.
 */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { startNode } from "../../src/server/runtime/start-node.js";
import { waitFor } from "../e2e/helpers.js";
import { loopbackNodeSettings } from "./helpers.js";

const settings = (o: Record<string, unknown>) => loopbackNodeSettings({ engine: "sim", ...o });

describe("an idle member's estimate age", () => {
  it("starts over with each of its digests instead of growing from its last state", async () => {
    const silent = { logger: pino({ level: "silent" }) };
    const a = await startNode(await settings({ id: "A" }), silent);
    const b = await startNode(await settings({ id: "B", join: new URL(a.peerUrl).host }), silent);
    try {
      let firstSeen: number | undefined;
      let oldest = 0;
      await waitFor(
        async () => {
          const view = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as {
            peers: { id: string; estimateAgeMs: number | null }[];
          };
          const age = view.peers.find((p) => p.id === "B")?.estimateAgeMs;
          if (age === undefined || age === null) return false;
          firstSeen ??= Date.now();
          oldest = Math.max(oldest, age);
          return Date.now() - firstSeen > 8_000;
        },
        40_000,
        "A to hold an estimate of B for 8 s",
      );
      // Digests go every poll to the one other member: far more often than this bound.
      expect(oldest).toBeLessThan(4_000);
    } finally {
      await Promise.all([b.stop(), a.stop()]);
    }
  }, 60_000);
});
