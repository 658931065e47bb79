/**
 * gossipRoundsPerPoll: the Δpoll tick's round arms the tick's later rounds, evenly spaced, and runs
 * no more than that many per tick (a late timer after the next tick does not add one).
 */
import { describe, expect, test } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { GossipAntiEntropy } from "../../src/core/node/gossip-anti-entropy.js";
import type { Effect } from "../../src/core/node/types.js";
import { RadixTree } from "../../src/core/radix-tree.js";

function gossiper(rounds: number) {
  const config = resolveNodeConfig({
    id: "A",
    peers: ["B", "C"],
    capacityTokens: 4096,
    gossip: "scuttlebutt",
    gossipRoundsPerPoll: rounds,
    pollMs: 400,
  });
  const g = new GossipAntiEntropy(config, "A", { now: () => 0, random: () => 0.5 });
  g.reset(1, ["B", "C"], 8);
  return g;
}

const digests = (out: Effect[]) =>
  out.filter((e) => e.type === "mesh-send" && e.msg.channel === "gossip" && e.msg.msg.type === "digest")
    .length;
const timers = (out: Effect[]) =>
  out.flatMap((e) => (e.type === "set-timer" && e.timer.kind === "gossip-round" ? [e.delayMs] : []));

describe("gossip rounds per Δpoll", () => {
  test("each tick runs gossipRoundsPerPoll rounds, evenly spaced, and no more", () => {
    const tree = new RadixTree({ capacity: 4096 });
    const peers = [{ id: "B", live: true, rttMs: 1 }];
    for (const rounds of [1, 2, 4]) {
      const g = gossiper(rounds);
      let out: Effect[] = [];
      g.round(0, tree, 0, 0, peers, out);
      let sent = digests(out);
      let armed = timers(out);
      for (let i = 0; i < 6; i++) {
        expect(armed).toEqual(sent < rounds ? [400 / rounds] : []);
        out = [];
        g.extraRound(0, tree, 0, 0, ["B"], out);
        sent += digests(out);
        armed = timers(out);
      }
      expect(sent).toBe(rounds);
    }
  });
});
