/**
 * The live dashboard in a real browser as nodes of its 3-node sim cluster stop
 * (dashboard-fixtures.ts): a SIGKILLed node turns suspected then down and its own page says it cannot
 * be reached; a SIGTERMed one shows down without passing through suspected.
 */
import { describe, expect, it } from "vitest";
import { CHROMIUM, dashboardCluster, LONG, SUITE } from "./dashboard-fixtures.js";
import { alive, waitFor } from "./helpers.js";

describe.skipIf(!CHROMIUM)(SUITE, () => {
  const d = dashboardCluster(true);
  const { problems, node, page, rowIs } = d;

  it("a node killed with SIGKILL turns suspected, then down; its own page says it cannot be reached", async () => {
    const c = node("C");
    process.kill(c.pid as number, "SIGKILL");
    await waitFor(() => !alive(c.pid), 10_000, "C to exit");
    await rowIs("A", "C", "suspected");
    await rowIs("A", "C", "down");
    // The stale estimate is not shown as a current size; SWIM's dropped one not as a last size of 0.
    const gone = (await (await fetch(`${node("A").apiUrl}/cluster`)).json()) as {
      peers: { id: string; goneForMs?: number }[];
    };
    expect(gone.peers.find((p) => p.id === "C")?.goneForMs).toBeTypeOf("number");
    expect(await page("A").locator('#members tr[data-node="C"] td:nth-child(5)').textContent()).toBe(
      "stale: dropped",
    );
    expect(await page("A").locator("#alerts .alert.down").textContent()).toContain(
      "Peer C is down (declared dead)",
    );
    // A's failure detector counted the suspicion of C (its own, or one it took from gossip).
    await page("A").waitForFunction(
      () =>
        Number(document.querySelector<HTMLElement>('#membership [data-key="suspected"]')?.dataset.count) >= 1,
      undefined,
      { timeout: LONG, polling: 100 },
    );
    await page("C").waitForFunction(
      () => document.getElementById("status")?.dataset.state === "unreachable",
      undefined,
      { timeout: LONG, polling: 100 },
    );
    expect(await page("C").locator("#alerts .alert.self").textContent()).toContain(
      "This node (C) cannot be reached",
    );
    // What it still shows of the members is marked as old.
    expect(await page("C").textContent("#members-note")).toMatch(/as this node saw them .* ago/);
  }, 120_000);

  it("a node stopped with SIGTERM shows down (it said goodbye), as /cluster says", async () => {
    const b = node("B");
    await page("A").evaluate(() => {
      // Every liveness A's page shows for B from now on, to check it never passes through 'suspected'.
      const seen: string[] = [];
      (window as unknown as { seenB: string[] }).seenB = seen;
      new MutationObserver(() => {
        const s = document.querySelector('#members tr[data-node="B"]')?.getAttribute("data-liveness");
        if (s && seen.at(-1) !== s) seen.push(s);
      }).observe(document.querySelector("#members tbody") as Node, { childList: true });
    });
    process.kill(b.pid as number, "SIGTERM");
    await rowIs("A", "B", "down");
    const seen = await page("A").evaluate(() => (window as unknown as { seenB: string[] }).seenB);
    expect(seen).not.toContain("suspected");
    const v = (await (await fetch(`${node("A").apiUrl}/cluster`)).json()) as {
      peers: { id: string; liveness: string; gone?: string }[];
    };
    expect(v.peers.find((p) => p.id === "B")).toMatchObject({ liveness: "down", gone: "left" });
    // A planned stop reads apart from a death.
    await page("A").waitForFunction(
      () =>
        document
          .querySelector("#alerts")
          ?.textContent?.includes("Peer B is down (said goodbye: a planned stop)"),
      undefined,
      { timeout: LONG, polling: 100 },
    );
    expect(problems).toEqual([]);
  }, 120_000);
});
