/**
 * The counters read from the node's own counts count on across a cache reset (cluster-view.ts
 * `keepCounts`): prefixmesh_forward_events, prefixmesh_client_gone_total,
 * prefixmesh_engine_aborted_total and prefixmesh_membership_events_total. The node's counts (and
 * `/cluster` `stats` and `membership`) start over with its new epoch (a new SWIM); a counter that fell
 * would read as a counter reset.
 */
import { describe, expect, it } from "vitest";
import type { ClusterView } from "../../src/server/runtime/cluster-view.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { postCompletion } from "../api-client.js";
import { DAEMON_RECOVERY, daemonGossip, forwardsIn, isType, prompt, warmPair } from "../core/node-harness.js";
import { harnessClusterView, nodesStoppedAfterEach, routedPair } from "./helpers.js";

const stopped = nodesStoppedAfterEach();

async function forwarded(node: NodeHandle): Promise<number | undefined> {
  const metrics = await (await fetch(`${node.apiUrl}/metrics`)).text();
  const m = /prefixmesh_forward_events\{[^}]*event="forwarded"[^}]*\} (\d+)/.exec(metrics);
  return m ? Number(m[1]) : undefined;
}

/** What the three counters read of `view`: a forward, a hang-up while running here, its run's abort. */
function counters(view: ClusterView) {
  const g = view.gauges();
  return {
    forwarded: g.forwardEvents?.forwarded,
    hangupRunning: g.clientGone?.hangup?.running,
    abortedClientGone: g.engineAborted?.["client-gone"],
  };
}

describe("prefixmesh_forward_events across a cache reset", () => {
  it("keeps the counts of the epoch before it", async () => {
    const prefix = Array.from({ length: 300 }, (_, i) => `reset${i}`).join(" ");
    const { a, model } = await routedPair(prefix, {}, { onStart: (x, y) => void [x, y].map(stopped) });
    const res = await postCompletion(a.apiUrl, { model, prompt: `${prefix} asked`, max_tokens: 1 });
    expect(res.headers.get("x-prefixmesh-served-by")).toBe("B");
    await res.text();
    expect(await forwarded(a)).toBe(1);

    const reset = await fetch(`${a.apiUrl}/admin/reset-cache`, { method: "POST" });
    expect(reset.status).toBe(200);
    // The node's own count started over with the reset; the metric did not.
    expect(a.runtime.clusterView().stats.forwarded).toBe(0);
    expect(await forwarded(a)).toBe(1);
  }, 60_000);

  it("forward events, client-gone and aborted runs count on over several resets, each counted once", () => {
    const h = warmPair({
      ...DAEMON_RECOVERY,
      forwardAckTimeoutMs: 250,
      forwardTimeoutMs: 5_000,
      abortRuns: true,
    });
    const view = harnessClusterView(h, "A", 10_000);
    const reset = () => {
      view.keepCounts();
      h.restart("A");
    };
    // A's client hangs up while its request (a topic B does not hold) runs on A's engine: aborted.
    const hangUp = (reqId: string) => {
      h.client("A", reqId, prompt(8, 1));
      h.input("A", { type: "client-gone", reqId });
      expect(h.endAborted("A")).toBe(1);
    };
    expect(forwardsIn(h.client("A", "f1", prompt(1, 5)))).toEqual(["B"]);
    h.deliver(isType("forward"));
    h.finishRuns("B");
    h.deliver();
    expect(h.repliesFor("f1")).toHaveLength(1);
    hangUp("r1");
    expect(counters(view)).toEqual({ forwarded: 1, hangupRunning: 1, abortedClientGone: 1 });

    reset();
    expect(h.node("A").stats()).toMatchObject({ forwarded: 0, clientGoneRunning: 0, abortedClientGone: 0 });
    expect(view.cluster(0).stats).toMatchObject({ forwarded: 0, clientGoneRunning: 0 });
    expect(counters(view)).toEqual({ forwarded: 1, hangupRunning: 1, abortedClientGone: 1 });

    hangUp("r2");
    expect(counters(view)).toEqual({ forwarded: 1, hangupRunning: 2, abortedClientGone: 2 });
    reset();
    expect(counters(view)).toEqual({ forwarded: 1, hangupRunning: 2, abortedClientGone: 2 });
    reset();
    expect(counters(view)).toEqual({ forwarded: 1, hangupRunning: 2, abortedClientGone: 2 });
  });

  it("SWIM's membership events count on over resets while /cluster shows the new SWIM's", () => {
    const h = daemonGossip(["A", "B"], 250);
    const view = harnessClusterView(h, "A", 10_000);
    const probes = () => view.gauges().membershipEvents?.probe ?? -1;
    const before = probes();
    expect(before).toBeGreaterThan(0);
    view.keepCounts();
    h.restart("A");
    expect(view.cluster(0).membership?.probes).toBe(0);
    expect(probes()).toBe(before);
    h.advanceLive(3_000);
    const ours = view.cluster(0).membership?.probes ?? 0;
    expect(ours).toBeGreaterThan(0);
    expect(probes()).toBe(before + ours);
  });
});
