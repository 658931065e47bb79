/**
 * The live dashboard's charts in a real browser, over a 3-node sim cluster (dashboard-fixtures.ts):
 * they move once requests are sent (the share chart mesh-wide, from every member's served count:
 * requests that never entered a node still show on its page).
 * DASHBOARD_SCREENSHOT=docs/dashboard.png saves the screenshot the README shows.
 */
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { describe, expect, it } from "vitest";
import type { RunningCluster } from "../../src/server/cluster/launcher.js";
import { postCompletion } from "../api-client.js";
import { CHROMIUM, dashboardCluster, LONG, SUITE } from "./dashboard-fixtures.js";
import { waitFor, words } from "./helpers.js";

const SCREENSHOT = process.env.DASHBOARD_SCREENSHOT;

describe.skipIf(!CHROMIUM)(SUITE, () => {
  const d = dashboardCluster(true);
  const { problems, node, page } = d;

  it("the charts update after requests are sent", async () => {
    // Three topics, each a long shared prefix: topic k enters first at node k (which keeps it),
    // then at every other node in turn, which affinity routing forwards to its holder.
    const prompts = Array.from({ length: 27 }, (_, i) => {
      const topic = `t${i % 3}_`;
      return `${words(topic, 300)} ${words(`q${i}_`, 20)}`;
    });
    const send = async (i: number) => {
      const entry = d.cluster.nodes[(i + Math.floor(i / 3)) % 3] as RunningCluster["nodes"][number];
      const r = await postCompletion(entry.apiUrl, { model: d.model, prompt: prompts[i], max_tokens: 4 });
      expect(r.status).toBe(200);
    };
    const nonzero = (id: string, chart: string) =>
      page(id).evaluate((c) => Number(document.getElementById(c)?.dataset.nonzero ?? -1), chart);
    // No request yet: nothing served, no latency; gossip flows all the same.
    for (const id of ["A", "B", "C"]) {
      for (const c of ["chart-share", "chart-route", "chart-hit", "chart-latency"])
        expect(await nonzero(id, c), `${id} ${c}`).toBe(0);
    }

    // The share chart is mesh-wide (the paper's Figure 3): requests that enter only at B and C show
    // on A's page at the shares the serving nodes' own counts give, A's own entries staying at none.
    const ownServed = async () => {
      const out: Record<string, number> = {};
      for (const n of d.cluster.nodes)
        out[n.id] = ((await (await fetch(`${n.apiUrl}/cluster`)).json()) as { served: number }).served;
      return out;
    };
    const before = await ownServed();
    const SOLO = 6;
    for (let i = 0; i < SOLO; i++) {
      const entry = node(i % 2 === 0 ? "B" : "C");
      const r = await postCompletion(entry.apiUrl, {
        model: d.model,
        prompt: words(`solo${i}_`, 40),
        max_tokens: 4,
      });
      expect(r.status).toBe(200);
    }
    const after = await ownServed();
    const delta = Object.fromEntries(Object.entries(after).map(([id, n]) => [id, n - (before[id] ?? 0)]));
    expect(Object.values(delta).reduce((x, y) => x + y, 0)).toBe(SOLO);
    expect((delta.B ?? 0) + (delta.C ?? 0)).toBeGreaterThan(0);
    const expected = Object.fromEntries(Object.entries(delta).map(([id, n]) => [id, (100 * n) / SOLO]));
    // Within the share window (30 s) of the first of them.
    await page("A").waitForFunction(
      (exp) => {
        const latest = JSON.parse(document.getElementById("chart-share")?.dataset.latest ?? "{}");
        return Object.entries(exp).every(([id, pct]) => Math.abs((latest[id] ?? -1) - pct) < 0.01);
      },
      expected,
      { timeout: 20_000, polling: 100 },
    );
    expect(await nonzero("A", "chart-route")).toBe(0);

    for (let i = 0; i < prompts.length; i++) await send(i);
    for (const id of ["A", "B", "C"]) {
      await page(id).waitForFunction(
        () =>
          ["chart-share", "chart-route", "chart-hit", "chart-latency", "chart-gossip"].every(
            (c) => Number(document.getElementById(c)?.dataset.nonzero ?? 0) > 0,
          ),
        undefined,
        { timeout: LONG, polling: 100 },
      );
    }
    // uPlot's legend shows the latest values: A's share chart names all three nodes.
    const legend = await page("A").locator("#chart-share .u-legend").textContent();
    for (const id of ["A", "B", "C"]) expect(legend).toContain(id);

    if (SCREENSHOT) {
      // More history for a readable picture: keep sending until the charts span ~40 polls.
      let i = 0;
      const enough = () =>
        page("A").evaluate(() => Number(document.getElementById("chart-share")?.dataset.points ?? 0) >= 40);
      while (!(await enough())) await send(i++ % prompts.length);
      await waitFor(enough, LONG, "40 points on A's charts");
      mkdirSync(dirname(SCREENSHOT), { recursive: true });
      await page("A").screenshot({ path: SCREENSHOT, fullPage: true });
    }
    expect(problems).toEqual([]);
  }, 180_000);
});
