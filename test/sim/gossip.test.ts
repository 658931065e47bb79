/**
 * Seeded simulations of the gossip mesh's membership (SWIM + Lifeguard, src/core/node/swim) on the
 * simulated network, with memberlist's default timings.
 */
import { describe, expect, test } from "vitest";
import { MAX_INCARNATION } from "../../src/core/node/swim/codec.js";
import { resolveSwimConfig, suspicionMinMs } from "../../src/core/node/swim/config.js";
import { GossipRounds } from "../../src/sim/gossip-rounds.js";
import { type MembershipSimConfig, runMembership } from "../../src/sim/membership-sim.js";

const base = { seed: 1, commMs: 2, jitterMs: 0.5 } satisfies Partial<MembershipSimConfig>;
const defaults = resolveSwimConfig();

/**
 * memberlist's detection bound for a crashed member: Lifeguard's longest suspicion (6 × the floor
 * 4 × max(1, log10 N) s) after the first failed probe, plus a few probe periods for some member to
 * probe it first and for the news to spread.
 */
function detectionBoundMs(n: number): number {
  return defaults.suspicionMaxTimeoutMult * suspicionMinMs(defaults, n) + 5 * defaults.probeIntervalMs;
}

function liveCounts(r: ReturnType<typeof runMembership>): (number | null)[] {
  return r.members.map((s) => (s === null ? null : s.liveMembers().length));
}

describe("membership by gossip (SWIM + Lifeguard)", () => {
  test("a cluster forms from one seed, and a late joiner is seen by all", () => {
    const r = runMembership({
      ...base,
      nodes: 16,
      durationMs: 40_000,
      seeds: [0],
      startAtMs: { 15: 20_000 },
    });
    expect(liveCounts(r)).toEqual(new Array(16).fill(15));
    const seenLate = r.trace.filter((t) => t.id === "n15" && t.to === "alive");
    expect(new Set(seenLate.map((t) => t.observer)).size).toBe(15);
    // Nobody had been told the joiner's id: everyone learned it from gossip, after it started.
    expect(Math.min(...seenLate.map((t) => t.at))).toBeGreaterThanOrEqual(20_000);
  });

  test("256 members starting at once through two seeds all know each other within a second", () => {
    // A seed's answers go out while its own list is still filling: each partial list is followed by
    // another push-pull, and no candidate named by a list is dropped, so nobody waits for gossip.
    const r = runMembership({
      ...base,
      nodes: 256,
      durationMs: 6_000,
      seeds: [0, 1],
      network: { lossProb: 0.05 },
    });
    const learned = new Map<string, number>();
    for (const t of r.trace)
      if (t.to === "alive" && !learned.has(`${t.observer}>${t.id}`))
        learned.set(`${t.observer}>${t.id}`, t.at);
    const times = [...learned.values()].sort((a, b) => a - b);
    expect(times).toHaveLength(256 * 255);
    expect(times[Math.ceil(0.99 * times.length) - 1]).toBeLessThan(1_000);
    expect(r.members.reduce((a, m) => a + (m?.stats.candidatesDropped ?? 0), 0)).toBe(0);
    expect(r.trace.filter((t) => t.to !== "alive")).toEqual([]);
  });

  test("a crashed member among 16 is found dead by every other within memberlist's bound", () => {
    for (const seed of [1, 2, 3]) {
      const crashAt = 20_000;
      const r = runMembership({
        ...base,
        seed,
        nodes: 16,
        durationMs: 80_000,
        crashes: [{ node: 3, atMs: crashAt }],
      });
      const dead = r.trace.filter((t) => t.id === "n3" && t.to === "dead");
      expect(new Set(dead.map((t) => t.observer)).size).toBe(15);
      const last = Math.max(...dead.map((t) => t.at)) - crashAt;
      expect(last).toBeLessThanOrEqual(detectionBoundMs(16));
      // No live member was ever suspected.
      expect(r.trace.filter((t) => t.id !== "n3" && t.to !== "alive")).toEqual([]);
      // Dead members are dropped from the live list everywhere.
      expect(liveCounts(r).filter((c) => c !== null)).toEqual(new Array(15).fill(14));
    }
  });

  test("others' failed probes confirm a crashed member's suspicion: all declare it dead near the floor", () => {
    // Lifeguard: a suspicion starts at 6 × the floor and falls to the floor as k = 2 independent
    // confirmations arrive; every member probing the suspect and failing is one.
    for (const nodes of [16, 64])
      for (const seed of [1, 2]) {
        const crashAt = 20_000;
        const r = runMembership({
          ...base,
          seed,
          nodes,
          durationMs: 60_000,
          crashes: [{ node: 3, atMs: crashAt }],
        });
        const about3 = r.trace.filter((t) => t.id === "n3");
        const suspectedAt = Math.min(...about3.filter((t) => t.to === "suspect").map((t) => t.at));
        const dead = about3.filter((t) => t.to === "dead");
        expect(new Set(dead.map((t) => t.observer)).size).toBe(nodes - 1);
        // Without the confirmations ~2.8 × the floor (one confirmer: the member that raised it).
        const lastDead = Math.max(...dead.map((t) => t.at));
        expect(lastDead - suspectedAt, `${nodes} nodes, seed ${seed}`).toBeLessThanOrEqual(
          suspicionMinMs(defaults, nodes) + defaults.probeIntervalMs,
        );
      }
  });

  test("a frozen member refutes its suspicion and is never declared dead", () => {
    const r = runMembership({
      ...base,
      nodes: 16,
      durationMs: 40_000,
      pauses: [{ node: 5, atMs: 20_000, untilMs: 27_000 }],
    });
    const about5 = r.trace.filter((t) => t.id === "n5" && t.at > 1_000);
    expect(about5.some((t) => t.to === "suspect")).toBe(true);
    expect(about5.some((t) => t.to === "dead")).toBe(false);
    const n5 = r.members[5];
    expect(n5?.currentIncarnation).toBeGreaterThan(0);
    expect(n5?.stats.refuted).toBeGreaterThan(0);
    for (const s of r.members) if (s !== null && s.selfId !== "n5") expect(s.status("n5")).toBe("alive");
  });

  test("under 5% message loss no live member among 128 is ever suspected", () => {
    for (const seed of [1, 2]) {
      const r = runMembership({ ...base, seed, nodes: 128, durationMs: 60_000, network: { lossProb: 0.05 } });
      expect(r.trace.filter((t) => t.to !== "alive")).toEqual([]);
      expect(liveCounts(r)).toEqual(new Array(128).fill(127));
    }
  });

  test("a joiner and the members list each other within one push-pull and one verification each way", () => {
    // A slow network and a slow authority (a loaded machine): 50 ms a message, 300 ms a verification.
    const commMs = 50;
    const verifyMs = 300;
    for (const seed of [1, 2, 3]) {
      const r = runMembership({
        ...base,
        seed,
        commMs,
        jitterMs: 10,
        verifyMs,
        nodes: 16,
        durationMs: 25_000,
        startAtMs: { 15: 20_000 },
      });
      const seen = (observer: string, id: string) =>
        r.trace.find((t) => t.observer === observer && t.id === id && t.to === "alive")?.at ?? Infinity;
      let last = 0;
      for (let i = 0; i < 15; i++) last = Math.max(last, seen(`n${i}`, "n15"), seen("n15", `n${i}`));
      // Sync there and back, then the joiner's and each member's verification with a message between:
      // about 2 × 300 + 4 × 50 ms (news of the joiner relayed hop by hop, each hop verifying, missed it).
      expect(last - 20_000).toBeLessThanOrEqual(2 * verifyMs + 8 * (commMs + 10));
    }
  });

  test("a partition heals: each side declares the other dead, then the cluster rejoins", () => {
    const left = [0, 1, 2, 3, 4, 5, 6, 7];
    const right = [8, 9, 10, 11, 12, 13, 14, 15];
    const r = runMembership({
      ...base,
      nodes: 16,
      // Longer than the detection bound at its slowest: probes across the cut get no nacks, so
      // Lifeguard stretches each side's probe period up to 8×, and a pass over 15 members then
      // takes 120 s; a shorter cut may heal while a member is still only suspected (seed-dependent).
      durationMs: 230_000,
      network: { partitions: [{ startMs: 10_000, endMs: 170_000, groups: [left, right] }] },
    });
    const deadAcross = r.trace.filter(
      (t) => t.to === "dead" && Number(t.observer.slice(1)) < 8 !== Number(t.id.slice(1)) < 8,
    );
    expect(deadAcross.length).toBe(2 * 8 * 8);
    expect(liveCounts(r)).toEqual(new Array(16).fill(15));
  });

  test("a member that leaves with a goodbye is marked left by all at once", () => {
    const r = runMembership({ ...base, nodes: 16, durationMs: 20_000, leaves: [{ node: 7, atMs: 10_000 }] });
    const left = r.trace.filter((t) => t.id === "n7" && t.to === "left");
    expect(new Set(left.map((t) => t.observer)).size).toBe(15);
    expect(Math.max(...left.map((t) => t.at)) - 10_000).toBeLessThan(100);
    expect(r.trace.filter((t) => t.id === "n7" && t.to === "suspect")).toEqual([]);
  });

  test("an impostor is refused everywhere, whoever it talks to", () => {
    const r = runMembership({ ...base, nodes: 16, durationMs: 30_000, seeds: [0, 1, 2], impostors: 2 });
    expect(r.trace.filter((t) => t.id.startsWith("imp"))).toEqual([]);
    for (const s of r.members) expect(s?.liveMembers().some((id) => id.startsWith("imp"))).toBe(false);
    const refused = r.members.reduce((a, s) => a + (s?.stats.refusedMembers ?? 0), 0);
    expect(refused).toBeGreaterThanOrEqual(3);
    expect(liveCounts(r)).toEqual(new Array(16).fill(15));
  });

  test("forged news at the incarnation ceiling is refused everywhere; a plausible forgery is refuted", () => {
    // Wall clocks spread over the refute margin less 2 ms; the forger's is furthest behind, the
    // plausibly forged victim's furthest ahead, forged at the highest incarnation it outbids: its answer
    // (two above, news above its own incarnation not being of its life) is the highest any must believe.
    const T = Date.UTC(2026, 0, 1);
    const { incarnationSkewMs: S, incarnationRefutations: R, incarnationRefuteMarginMs: M } = defaults;
    const clockOffsetMs = Object.fromEntries(
      Array.from({ length: 16 }, (_, i) => [i, T + Math.floor((i / 15) * (M - 2))]),
    );
    const at = 20_000;
    const forged = (id: string, status: "suspect" | "dead", incarnation: number) => ({
      node: 0,
      atMs: at,
      update: { id, status, incarnation, from: "n0" },
    });
    for (const seed of [1, 2]) {
      const r = runMembership({
        ...base,
        seed,
        nodes: 16,
        durationMs: 60_000,
        clockOffsetMs,
        forgeries: [
          forged("n8", "suspect", MAX_INCARNATION),
          forged("n9", "dead", MAX_INCARNATION),
          forged("n15", "suspect", (clockOffsetMs[15] as number) + at + R + S - M),
        ],
      });
      expect(r.trace.filter((t) => t.to === "dead" || t.to === "left")).toEqual([]);
      expect(r.trace.filter((t) => t.id !== "n15" && t.to !== "alive")).toEqual([]);
      // n15 was suspected by the forgery and refuted it: alive everywhere at the end.
      expect(r.trace.some((t) => t.id === "n15" && t.to === "suspect")).toBe(true);
      expect(r.members[15]?.stats.refuted).toBe(1);
      expect(liveCounts(r)).toEqual(new Array(16).fill(15));
      // Each member refused the two ceiling forgeries, once each, and nothing else.
      const refused = r.members.map((m) => m?.stats.implausibleIncarnations);
      expect(refused).toEqual([0, ...new Array(15).fill(2)]);
    }
  });

  test("messages per member grow with change, not with N: at 64 ≤ 1.25 × at 16", () => {
    const rate = (nodes: number) => {
      const r = runMembership({ ...base, nodes, durationMs: 60_000, countFromMs: 30_000 });
      expect(liveCounts(r)).toEqual(new Array(nodes).fill(nodes - 1));
      return r.sentPerNode.reduce((a, b) => a + b, 0) / nodes / 30;
    };
    const r16 = rate(16);
    const r64 = rate(64);
    expect(r16).toBeGreaterThan(0);
    expect(r64).toBeLessThanOrEqual(1.25 * r16);
  });
});

describe("scuttlebutt anti-entropy", () => {
  /** Rounds until every node holds owner 0's change, after a warm-up in which everyone met everyone. */
  function roundsToSpread(nodes: number, seed: number, lossProb = 0): number {
    const sim = new GossipRounds({ nodes, seed, lossProb });
    for (let i = 0; i < nodes; i++) sim.change(i);
    const converged = () => sim.nodes.every((_, i) => sim.holders(i) === nodes);
    for (let r = 0; r < 4 * Math.log2(nodes) + 10 && !converged(); r++) sim.round();
    expect(converged()).toBe(true);
    sim.change(0);
    for (let r = 1; r <= 64; r++) {
      sim.round();
      if (sim.holders(0) === nodes) return r;
    }
    return Number.POSITIVE_INFINITY;
  }

  test.each([16, 64, 256])("a change reaches all %i nodes in ≤ 2·log2 N rounds", (n) => {
    for (const seed of n > 64 ? [1] : [1, 2])
      expect(roundsToSpread(n, seed)).toBeLessThanOrEqual(2 * Math.log2(n));
  });

  test("and under 5% message loss still within 2·log2 N rounds at 64 nodes", () => {
    expect(roundsToSpread(64, 3, 0.05)).toBeLessThanOrEqual(2 * Math.log2(64));
  });

  /** Every owner changes each round: bytes per node per round, and the share of held estimates current. */
  function busy(nodes: number, maxEstimates: number) {
    const sim = new GossipRounds({ nodes, seed: 4, maxEstimates });
    for (let i = 0; i < nodes; i++) sim.change(i);
    for (let r = 0; r < 12; r++) sim.round();
    const bytes0 = sim.bytes;
    let held = 0;
    let current = 0;
    for (let r = 0; r < 3; r++) {
      for (let i = 0; i < nodes; i++) sim.change(i, 2);
      sim.round();
      for (let i = 0; i < nodes; i++) {
        const h = sim.holding(i);
        held += h.held;
        current += h.current;
      }
    }
    return { bytes: (sim.bytes - bytes0) / nodes / 3, current: current / held, held: held / 3 / nodes };
  }

  test("with --max-estimates, owners push to their holders: estimates stay current, bytes do not grow with N", () => {
    const small = busy(64, 16);
    const big = busy(256, 16);
    for (const b of [small, big]) {
      expect(b.held).toBeCloseTo(16, 0);
      // Relays alone (random partners rarely share an owner held by 16 of 256) kept 4% current.
      expect(b.current).toBeGreaterThan(0.85);
    }
    expect(big.bytes / small.bytes).toBeLessThan(1.25);
    expect(big.bytes / small.bytes).toBeGreaterThan(0.8);
  });
});
