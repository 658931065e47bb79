/**
 * One SWIM step's member changes reach the node as `up` / `down` lists (swim-membership.ts `translate`),
 * handled ups first (mesh.ts `step`): the order within the step is lost. That is sound only while no
 * step says both of one member. These tests guard that it cannot: a message only ever takes members
 * down (an alive heard of a dead or departed member names a candidate, checked by a later input), and
 * only the runtime's `verified` brings one up, at most one change per step. Through the node, its
 * per-peer state (forward targets, estimates) follows SWIM's status after every step.
 */
import { describe, expect, test } from "vitest";
import { PrefixNode } from "../../src/core/node/node.js";
import type { MemberStatus, MemberUpdate, SwimEffect } from "../../src/core/node/swim/types.js";
import type { Effect, NodeInput } from "../../src/core/node/types.js";
import { gossipNode, harness } from "./swim-harness.js";

const LIFE = 100;
const STATUSES: MemberStatus[] = ["alive", "suspect", "dead", "left"];

/** Every update about "b" around its life: each status at the life held, one and two above. */
const UPDATES: MemberUpdate[] = STATUSES.flatMap((status) =>
  [LIFE, LIFE + 1, LIFE + 2].map((incarnation) => ({ id: "b", status, incarnation, from: "c" })),
);

const changesOf = (effects: SwimEffect[], id: string) =>
  effects.filter((e) => (e.type === "member-up" || e.type === "member-down") && e.id === id);

/** A Swim holding "b" (at LIFE) and "c" alive, then "b" moved to `start` by gossip. */
function holding(start: MemberStatus) {
  const h = harness("a");
  h.admit("c", 0);
  h.gossip("x", [{ id: "b", status: "alive", incarnation: LIFE }]);
  h.verified("b", true, LIFE);
  if (start !== "alive") h.gossip("c", [{ id: "b", status: start, incarnation: LIFE, from: "c" }]);
  expect(h.swim.status("b")).toBe(start);
  return h;
}

describe("one SWIM step never says both up and down of one member", () => {
  test.each(STATUSES)("a message of any two updates about a member held %s", (start) => {
    for (const first of UPDATES)
      for (const second of UPDATES) {
        const h = holding(start);
        const changes = changesOf(h.gossip("c", [first, second]), "b");
        // At most one change, and never up: a way back in goes through a check (a later input).
        expect(changes.length, `${JSON.stringify([first, second])}`).toBeLessThanOrEqual(1);
        expect(changes.filter((e) => e.type === "member-up")).toEqual([]);
      }
  });

  test("a check's answer: one change of the member checked, up or down", () => {
    const back = holding("dead");
    back.gossip("b", [{ id: "b", status: "alive", incarnation: LIFE + 2 }]);
    expect(changesOf(back.verified("b", true, LIFE + 2), "b")).toEqual([{ type: "member-up", id: "b" }]);
    const refused = holding("alive");
    refused.gossip("c", [{ id: "b", status: "alive", incarnation: LIFE + 5 }]);
    const effects = refused.verified("b", false);
    expect(changesOf(effects, "b")).toEqual([{ type: "member-down", id: "b", reason: "dead" }]);
  });
});

interface Inside {
  members: { swim: { liveMembers(): readonly string[] } };
  origin: { targets: { get(id: string): unknown } };
  antiEntropy: { members: Set<string> };
}

/** The node's per-peer state against SWIM's: a target and an estimate holder iff alive or suspect. */
function expectInStep(node: PrefixNode, ids: readonly string[], what: string) {
  const inside = node as unknown as Inside;
  const live = new Set(inside.members.swim.liveMembers());
  for (const id of ids) {
    const held = live.has(id);
    expect(inside.origin.targets.get(id) !== undefined, `${what}: target ${id}`).toBe(held);
    expect(inside.antiEntropy.members.has(id), `${what}: estimate ${id}`).toBe(held);
    expect(node.livenessOf(id) !== "down", `${what}: liveness ${id}`).toBe(held);
  }
}

describe("through the node: its peer state follows SWIM after every step", () => {
  test("death then a newer life in one message: out till the check passes, then back", () => {
    const ids = ["b", "c"];
    const { node, gossip } = gossipNode();
    for (const id of ids) {
      gossip("x", [{ id, status: "alive", incarnation: LIFE }]);
      node.handle({ type: "member-verified", id, ok: true, incarnation: LIFE });
    }
    expectInStep(node, ids, "admitted");
    for (const [k, gone] of (["dead", "left"] as const).entries()) {
      const life = LIFE + 2 * k;
      const asked = gossip("c", [
        { id: "b", status: gone, incarnation: life, from: "c" },
        { id: "b", status: "alive", incarnation: life + 2 },
      ]);
      expectInStep(node, ids, `${gone} then alive`);
      expect(node.livenessOf("b")).toBe("down");
      expect(asked).toContainEqual({ type: "verify-member", id: "b" });
      node.handle({ type: "member-verified", id: "b", ok: true, incarnation: life + 2 });
      expectInStep(node, ids, `${gone}: verified`);
      expect(node.livenessOf("b")).toBe("live");
    }
  });

  test("random steps (gossip, goodbyes, checks, timers): never out of step", () => {
    let seed = 7;
    const rand = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    let now = 0;
    const node = new PrefixNode(
      { id: "a", peers: [], gossip: "scuttlebutt", capacityTokens: 1_000 },
      { now: () => now, random: rand },
    );
    node.start();
    const ids = ["b", "c", "d", "e"];
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)] as T;
    let asks: string[] = [];
    const run = (input: NodeInput) => {
      const out: Effect[] = node.handle(input);
      for (const e of out) if (e.type === "verify-member") asks.push(e.id);
    };
    for (const id of ids) {
      run({
        type: "mesh-message",
        from: "x",
        msg: {
          channel: "swim",
          msg: { type: "gossip", updates: [{ id, status: "alive", incarnation: LIFE }] },
        },
      });
    }
    // Lives keep rising, so members out come back (a check passes) as well as go.
    const life = () => LIFE + Math.floor(now / 2_000) + Math.floor(rand() * 4);
    let flips = 0;
    let was = "";
    for (let step = 0; step < 3_000; step++) {
      now += Math.floor(rand() * 400);
      const r = rand();
      if (r < 0.5) {
        const updates = Array.from({ length: 1 + Math.floor(rand() * 4) }, () => ({
          id: pick(ids),
          status: pick(STATUSES),
          incarnation: life(),
          from: pick(ids),
        }));
        run({
          type: "mesh-message",
          from: pick(ids),
          msg: { channel: "swim", msg: { type: "gossip", updates } },
        });
      } else if (r < 0.6) {
        const from = pick(ids);
        const msg = { type: "goodbye" as const, incarnation: life() };
        run({ type: "mesh-message", from, msg: { channel: "swim", msg } });
      } else if (r < 0.85 && asks.length > 0) {
        const pending = asks;
        asks = [];
        for (const id of pending) run({ type: "member-verified", id, ok: rand() < 0.9 });
      } else {
        // Probe periods suspect the silent; gossip ticks time suspicions out into deaths.
        const kind = rand() < 0.5 ? "swim-probe" : "swim-gossip";
        run({ type: "timer", timer: { kind: "swim", timer: { kind } } });
      }
      expectInStep(node, ids, `step ${step}`);
      const live = ids.filter((id) => node.livenessOf(id) !== "down").join();
      if (live !== was) flips++;
      was = live;
    }
    // The walk went both ways many times (members out and back in): the check above was put to the test.
    expect(flips).toBeGreaterThan(50);
  });
});
