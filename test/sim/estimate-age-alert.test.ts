/**
 * docs/operations.md's "Stale estimates" alert under --gossip scuttlebutt holds on a healthy idle mesh
 * of 64 nodes: an idle member's estimate is confirmed only by its own digests, which reach a node at
 * fanout × rounds per Δpoll ÷ live peers per Δpoll, so a fixed multiple of Δpoll fires on a large mesh.
 * The documented threshold must scale so, and its divisor must be what the code does.
 */
import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { resolveNodeConfig } from "../../src/core/node/config.js";
import { runSimulation } from "../../src/sim/run.js";
import { DAEMON_POLL_MS, daemonSimConfig, tinyWorkload } from "./helpers.js";

const ops = readFileSync(new URL("../../docs/operations.md", import.meta.url), "utf8");
const row = ops.split("\n").find((l) => l.startsWith("| Stale estimates |")) ?? "";
/** The scuttlebutt rule, each number in it `#`: the multiple, the floor of live peers, the divisor. */
const RULE =
  "`--gossip scuttlebutt`: `prefixmesh_peer_estimate_age_seconds > on(node) group_left() " +
  '(# * <Δpoll in s> * clamp_min(prefixmesh_members{state="live"}, #) / #)`';
const rule = new RegExp(RULE.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").replaceAll("#", "(\\d+)")).exec(row);

describe("the stale-estimate alert on a healthy idle mesh (--gossip scuttlebutt)", () => {
  test("its threshold scales with the live peers by what the gossip does", () => {
    expect(rule, `no scuttlebutt rule in: ${row}`).not.toBeNull();
    const [, , floor, perPoll] = (rule as RegExpExecArray).map(Number);
    const c = resolveNodeConfig({ id: "x", capacityTokens: 1, gossip: "scuttlebutt" });
    expect(perPoll).toBe(c.gossipFanout * c.gossipRoundsPerPoll);
    expect(floor).toBe(c.gossipFanout);
  });

  test("no live idle member's age passes it at 64 nodes, though many pass 10 × Δpoll", () => {
    const [, times, floor, perPoll] = (rule as RegExpExecArray).map(Number) as number[];
    const nodes = 64;
    const ages: number[] = [];
    let over = 0;
    const w = tinyWorkload({ seed: 3, requests: nodes, arrival: "open-loop", gapMs: 15 });
    runSimulation(
      { ...daemonSimConfig(3, nodes), gossip: "scuttlebutt", settleMs: 30_000, keepRecords: false },
      w,
      {
        probe: {
          everyMs: DAEMON_POLL_MS,
          // Well after the last arrival: the workload's states have spread, the mesh is idle.
          fromMs: 12_000,
          observe(_now, probed) {
            for (const n of probed) {
              const live = (n?.peers() ?? []).filter((p) => p.liveness === "live");
              const mean = (Math.max(live.length, floor as number) / (perPoll as number)) * DAEMON_POLL_MS;
              for (const p of live) {
                if (p.estimateAgeMs === undefined) continue;
                ages.push(p.estimateAgeMs / mean);
                if (p.estimateAgeMs > (times as number) * mean) over++;
              }
            }
          },
        },
      },
    );
    expect(ages.length).toBeGreaterThan(nodes * (nodes - 1) * 20);
    expect(over).toBe(0);
    ages.sort((a, b) => a - b);
    // The documented mean interval is the code's: an exponential wait's median is ln 2 of its mean.
    const median = ages[Math.floor(ages.length / 2)] as number;
    expect(median).toBeGreaterThan(0.5 * Math.LN2);
    expect(median).toBeLessThan(1.5 * Math.LN2);
    // A fixed 10 × Δpoll would fire on this healthy mesh.
    const meanPolls = (nodes - 1) / (perPoll as number);
    expect(ages.at(-1) as number).toBeGreaterThan(10 / meanPolls);
  });
});
