/**
 * A test harness shared by the SWIM tests (swim-membership, swim-join, swim-forged, swim-revival(-recheck),
 * swim-own-word, swim-refute, swim-crash-loop): one Swim, its clock moved by hand (`at`).
 */
import { PrefixNode } from "../../src/core/node/node.js";
import type { SwimConfigInput } from "../../src/core/node/swim/config.js";
import { Swim } from "../../src/core/node/swim/swim.js";
import type { MemberUpdate, SwimEffect, SwimMessage } from "../../src/core/node/swim/types.js";

/** One Swim booted at `bootAt`; its sends and verify-member effects recorded, `verified` answers them. */
export function harness(self = "a", seeds: string[] = [], config: SwimConfigInput = {}, bootAt = 0) {
  let now = bootAt;
  const swim = new Swim(self, seeds, { now: () => now, random: () => 0.5 }, config);
  const sent: { to: string; msg: SwimMessage }[] = [];
  const verifies: string[] = [];
  const run = (effects: SwimEffect[]) => {
    for (const e of effects) {
      if (e.type === "send") sent.push({ to: e.to, msg: e.msg });
      if (e.type === "verify-member") verifies.push(e.id);
    }
    return effects;
  };
  const gossip = (from: string, updates: MemberUpdate[]) =>
    run(swim.handle({ type: "message", from, msg: { type: "gossip", updates } }));
  /** The runtime's answer; `incarnation`: the member's own, as its hello said (absent: none said). */
  const verified = (id: string, ok: boolean, incarnation?: number) =>
    run(swim.handle({ type: "verified", id, ok, ...(incarnation !== undefined ? { incarnation } : {}) }));
  const admit = (who: string, incarnation = 0) => {
    gossip("x", [{ id: who, status: "alive", incarnation }]);
    verified(who, true);
  };
  /** What this node says of `id` (itself too) on its next gossip tick: its queued update, if any. */
  const saysOf = (id: string) => {
    sent.length = 0;
    run(swim.handle({ type: "timer", timer: { kind: "swim-gossip" } }));
    return sent.flatMap(({ msg }) => ("updates" in msg ? msg.updates : [])).find((u) => u.id === id);
  };
  return {
    swim,
    sent,
    verifies,
    run,
    gossip,
    verified,
    admit,
    saysOf,
    incarnationOf: (id: string) => swim.memberViews().find((m) => m.id === id)?.incarnation,
    at: (t: number) => {
      now = t;
    },
    msg: (from: string, msg: SwimMessage) => run(swim.handle({ type: "message", from, msg })),
  };
}

/** A scuttlebutt PrefixNode "a" at time 0, and a way to hand it SWIM gossip from `from`. */
export function gossipNode() {
  const node = new PrefixNode(
    { id: "a", peers: [], gossip: "scuttlebutt", capacityTokens: 1_000 },
    { now: () => 0, random: () => 0.5 },
  );
  node.start();
  const gossip = (from: string, updates: MemberUpdate[]) =>
    node.handle({ type: "mesh-message", from, msg: { channel: "swim", msg: { type: "gossip", updates } } });
  return { node, gossip };
}
