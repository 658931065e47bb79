/** Routing policies on hand-made candidate lists (the contract every policy keeps: policies.case.test.ts). */
import { describe, expect, it } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import {
  type Candidate,
  createPolicy,
  POLICY_NAMES,
  type Policy,
} from "../../src/core/node/policies/index.js";
import { Prng } from "../../src/core/prng.js";
import { forwardsIn, Harness, prompt } from "./node-harness.js";

/** Candidates from "id:match:queue …"; the first one is self. */
function cands(spec: string): Candidate[] {
  return spec.split(" ").map((c, i) => {
    const [id, match, queue] = c.split(":");
    return {
      id: id as string,
      self: i === 0,
      estimatedMatch: Number(match),
      estimateAgeMs: 0,
      queueDepth: Number(queue),
      rttMs: 1,
      capacityTokens: 1000,
    };
  });
}

/** A node's cost priors before it has timed anything (the config's defaults), no service time yet. */
const prior = resolveNodeConfig({ id: "A", capacityTokens: 1000 }).costPrior;

const ctx = (seed = 1) => {
  const r = new Prng(seed);
  const costs = {
    prefillFixedMs: prior.prefillFixedMs,
    prefillMsPerToken: prior.prefillMsPerToken,
    serviceMs: 0,
    rttPriorMs: prior.rttMs,
    samples: 0,
  };
  return { promptTokens: 100, now: 0, random: () => r.next(), costs };
};

/** The policy's first choice among `cands(spec)`. */
const first = (p: Policy, spec: string, seed = 1): number | undefined => p.rank(cands(spec), ctx(seed))[0];

describe("routing policies", () => {
  it("local always picks self", () => {
    expect(first(createPolicy("local"), "A:0:9 B:99:0")).toBe(0);
  });

  it("affinity: longest match first, ties to self, random among tied peers", () => {
    const p = createPolicy("affinity");
    expect(p.rank(cands("A:10:0 B:40:0 C:20:0"), ctx())).toEqual([1, 2, 0]);
    expect(first(p, "A:40:0 B:40:0")).toBe(0);
    const firsts = new Set<number | undefined>();
    for (let s = 1; s <= 50; s++) firsts.add(first(p, "A:0:0 B:40:0 C:40:0", s));
    expect(firsts).toEqual(new Set([1, 2]));
  });

  it.each([
    ["C:0:0 A:0:0 B:0:0", 1], // nobody holds anything: the lowest id wins, even over self
    ["C:10:0 A:40:0 B:40:0", 1],
    ["A:40:0 B:40:0", 0],
  ])("affinity-argmax: first maximum in id order wins, self included at its position (%s)", (spec, want) => {
    expect(first(createPolicy("affinity-argmax"), spec)).toBe(want);
  });

  it("round-robin cycles over all eligible nodes", () => {
    const p = createPolicy("round-robin");
    const c = cands("A:0:0 B:0:0 C:0:0");
    const firsts = [0, 1, 2, 3, 4, 5].map(() => c[p.rank(c, ctx())[0]!]!.id);
    expect(firsts).toEqual(["A", "B", "C", "A", "B", "C"]);
  });

  it("random spreads over nodes; least-loaded picks the shortest queue, ties to self", () => {
    const c = cands("A:0:2 B:0:0 C:50:0");
    const seen = new Set<number>();
    const p = createPolicy("random");
    for (let s = 1; s <= 60; s++) seen.add(p.rank(c, ctx(s))[0]!);
    expect(seen).toEqual(new Set([0, 1, 2]));
    const ll = createPolicy("least-loaded");
    expect(ll.rank(c, ctx())[0]).toBe(2); // B and C idle; C has the longer match
    expect(first(ll, "A:0:0 B:90:0")).toBe(0);
  });
});

describe("policy settings", () => {
  it("defaults reproduce the unconfigured policy; bad settings are a clear error", () => {
    const c = cands("A:10:3 B:40:0 C:40:1 D:0:0");
    for (const name of POLICY_NAMES)
      expect(createPolicy(name, {}).rank(c, ctx(5)), name).toEqual(createPolicy(name).rank(c, ctx(5)));
    expect(() => createPolicy("affinity", { ties: "coin" as never })).toThrow(
      /invalid affinity policy config: ties/,
    );
    expect(() => createPolicy("local", { extra: 1 } as never)).toThrow(/invalid local policy config/);
    expect(() => createPolicy("cost-aware", { tieBlocks: -1 })).toThrow(/tieBlocks/);
  });

  it("affinity's tie rule: self first (default), at random with self, or by id without randomness", () => {
    const tied = "B:40:0 A:40:0 C:40:0"; // self (B) ties with both peers
    const firsts = (ties: "random" | "self-then-random") =>
      new Set(Array.from({ length: 60 }, (_, s) => first(createPolicy("affinity", { ties }), tied, s + 1)));
    expect(firsts("self-then-random")).toEqual(new Set([0]));
    expect(firsts("random")).toEqual(new Set([0, 1, 2]));
    let draws = 0;
    const byId = createPolicy("affinity", { ties: "id" });
    const counting = { ...ctx(), random: () => ++draws };
    expect(byId.rank(cands(tied), counting)).toEqual([1, 0, 2]); // A, B, C
    expect(draws).toBe(0);
    expect(byId.rank(cands(tied), ctx())).toEqual(createPolicy("affinity-argmax").rank(cands(tied), ctx()));
  });

  it("cost-aware without rent-or-buy needs no demand and rents; tieBlocks 0 stops spreading ties", () => {
    expect(createPolicy("cost-aware").needs).toEqual({ peers: true, demand: true });
    const rentOnly = createPolicy("cost-aware", { rentOrBuy: false });
    expect(rentOnly.needs).toEqual({ peers: true, demand: false });
    const far = [cands("A:0:0")[0]!, { ...cands("A:0:0 B:90:0")[1]!, rttMs: 5 }];
    const reuse = { ...ctx(), expectedReuse: 1e6 };
    expect(createPolicy("cost-aware").rank(far, reuse)).toEqual([0]); // buys: serves here
    expect(rentOnly.rank(far, reuse)[0]).toBe(1); // rents: forwards
    // Two replicas 0.1 ms apart: within a block's prefill they are spread; with tieBlocks 0, never.
    const replicas = [far[0]!, { ...far[1]!, id: "B", rttMs: 4.0 }, { ...far[1]!, id: "C", rttMs: 4.1 }];
    const strict = createPolicy("cost-aware", { tieBlocks: 0 });
    const spread = new Set(
      Array.from({ length: 40 }, (_, s) => createPolicy("cost-aware").rank(replicas, ctx(s + 1))[0]),
    );
    const tight = new Set(Array.from({ length: 40 }, (_, s) => strict.rank(replicas, ctx(s + 1))[0]));
    expect(spread).toEqual(new Set([1, 2]));
    expect(tight).toEqual(new Set([1]));
  });

  it("a node takes its policy's settings from its config, validated there", () => {
    expect(() =>
      resolveNodeConfig({ id: "A", capacityTokens: 10, policy: "affinity", policyConfig: { ties: 3 } }),
    ).toThrow(/policyConfig\.ties/);
    const cfg = resolveNodeConfig({
      id: "A",
      capacityTokens: 10,
      policy: "cost-aware",
      policyConfig: { rentOrBuy: false },
    });
    expect(cfg.policyConfig).toEqual({ rentOrBuy: false });
  });

  it("a node routes with its configured settings, kept across setPolicy unless new ones are given", () => {
    const h = new Harness(["A", "B"], { policy: "affinity", policyConfig: { ties: "id" } });
    h.gossip(2);
    // Nobody holds anything: by id, B's tie goes to A (the default rule would keep it at B).
    expect(forwardsIn(h.client("B", "r1", prompt(1, 1)))).toEqual(["A"]);
    h.node("B").setPolicy("affinity");
    expect(forwardsIn(h.client("B", "r2", prompt(2, 1)))).toEqual(["A"]);
    h.node("B").setPolicy("affinity", {});
    expect(forwardsIn(h.client("B", "r3", prompt(3, 1)))).toEqual([]);
  });
});
