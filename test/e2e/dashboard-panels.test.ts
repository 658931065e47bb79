/**
 * The live dashboard's panels in a real browser, over a healthy 3-node sim cluster
 * (dashboard-fixtures.ts): every node's page renders under its Content-Security-Policy, with the same
 * colour per node everywhere; the candidates a node refuses are listed, a reason's markup shown as
 * text; the failure detector's panel shows the node's own SWIM counts, highlighting those to alert on.
 */
import { describe, expect, it } from "vitest";
import { CHROMIUM, dashboardCluster, LONG, PAGE_EVERY_MS, SUITE } from "./dashboard-fixtures.js";

describe.skipIf(!CHROMIUM)(SUITE, () => {
  const d = dashboardCluster(false);
  const { problems, node, page } = d;

  it("renders on every node: three members live, no CSP violation or script error", async () => {
    for (const n of d.cluster.nodes) {
      const res = await page(n.id).goto(`${n.apiUrl}/?every=${PAGE_EVERY_MS}`);
      expect(res?.status()).toBe(200);
      expect(res?.headers()["content-security-policy"]).toContain("script-src 'self'");
      await page(n.id).waitForFunction(
        () => document.querySelectorAll('#members tr[data-liveness="live"]').length === 3,
        undefined,
        { timeout: LONG, polling: 100 },
      );
      expect(await page(n.id).textContent("#node-id")).toBe(n.id);
      // Every chart is drawn by uPlot (a canvas), from the page's own origin's script.
      expect(await page(n.id).locator("figure .uplot canvas").count()).toBe(5);
    }
    // A node has the same colour on every node's page (its rows and chart lines).
    const colours = await Promise.all(
      d.cluster.nodes.map((n) =>
        page(n.id).evaluate(() =>
          Object.fromEntries(
            Array.from(document.querySelectorAll<HTMLElement>("#members tr[data-node]")).map((tr) => [
              tr.dataset.node,
              getComputedStyle(tr.querySelector(".swatch") as Element).backgroundColor,
            ]),
          ),
        ),
      ),
    );
    expect(new Set(Object.values(colours[0] ?? {})).size).toBe(3);
    for (const c of colours) expect(c).toEqual(colours[0]);
    expect(problems).toEqual([]);
  });

  it("lists the candidates this node refuses, a peer's markup in a reason as text", async () => {
    // A's own /cluster, with refusals added on the way to the page: what a real refusal puts there.
    const p = await d.browser.newPage();
    p.on("pageerror", (e) => problems.push(`refused page error: ${e.message}`));
    const evil = "<img src=x id=injected>";
    const refused = Array.from({ length: 7 }, (_, i) => ({
      id: i === 0 ? "X" : `R${i}`,
      reason: i === 0 ? `wrong-cluster: peer 'X' belongs to cluster '${evil}', not 'test'` : "wrong-model: m",
      refusals: 3,
      refusedForMs: 5000,
      recheckInMs: 25_000,
    }));
    await p.route("**/cluster", async (route) => {
      const res = await route.fetch();
      await route.fulfill({ response: res, json: { ...(await res.json()), refused } });
    });
    await p.goto(`${node("A").apiUrl}/?every=${PAGE_EVERY_MS}`);
    const x = p.locator('#refused li[data-member="X"]');
    await x.waitFor({ timeout: LONG });
    expect(await x.locator(".code").textContent()).toBe("wrong-cluster");
    expect(await x.locator(".reason").textContent()).toBe(
      `peer 'X' belongs to cluster '${evil}', not 'test'`,
    );
    expect(await x.textContent()).toContain("3 refusals in a row · re-check in 25 s");
    expect(await p.locator("#refused").textContent()).toContain("and 2 more");
    expect(await p.locator("#injected").count()).toBe(0);
    // Without refusals the page (any other node's) shows none.
    expect(await page("B").locator("#refused").isHidden()).toBe(true);
    // A poll may be inside a route callback now: closing under it would reject its fetch unhandled.
    await p.unrouteAll({ behavior: "ignoreErrors" });
    await p.close();
    expect(problems).toEqual([]);
  });

  it("shows each peer's trust as /cluster says it: a breaker not closed stands out", async () => {
    // The real page: every peer's breaker closed, its score as /cluster has it.
    const a = page("A");
    const trustOf = (pg: typeof a, id: string) => pg.locator(`#members tr[data-node="${id}"] td`).last();
    await a.waitForFunction(
      () => document.querySelectorAll('#members tr[data-node="B"] td').length === 9,
      undefined,
      { timeout: LONG, polling: 100 },
    );
    const view = (await (await fetch(`${node("A").apiUrl}/cluster`)).json()) as {
      peers: { id: string; trust: { state: string; score: number } | null }[];
    };
    const b = view.peers.find((x) => x.id === "B");
    expect(await trustOf(a, "B").textContent()).toBe(`${b?.trust?.state} · ${b?.trust?.score.toFixed(2)}`);
    expect(await trustOf(a, "A").textContent()).toBe("–");
    // A peer whose breaker opened: what a failing peer puts in A's /cluster.
    const p = await d.browser.newPage();
    p.on("pageerror", (e) => problems.push(`trust page error: ${e.message}`));
    await p.route("**/cluster", async (route) => {
      const res = await route.fetch();
      const v = (await res.json()) as { peers: { id: string; trust: unknown }[] };
      for (const x of v.peers)
        if (x.id === "C") x.trust = { ...(x.trust as object), state: "open", score: 0.25 };
      await route.fulfill({ response: res, json: v });
    });
    await p.goto(`${node("A").apiUrl}/?every=${PAGE_EVERY_MS}`);
    const c = trustOf(p, "C").locator(".yes");
    await c.waitFor({ timeout: LONG });
    expect(await c.textContent()).toBe("open · 0.25");
    await p.unrouteAll({ behavior: "ignoreErrors" });
    await p.close();
    expect(problems).toEqual([]);
  });

  it("shows the failure detector's counts from the node's /cluster; a healthy mesh sends no bad gossip", async () => {
    type Counts = Record<string, number>;
    const membership = async () =>
      ((await (await fetch(`${node("A").apiUrl}/cluster`)).json()) as { membership: Counts }).membership;
    const onPage = () =>
      page("A").evaluate(() =>
        Object.fromEntries(
          Array.from(document.querySelectorAll<HTMLElement>("#membership [data-key]")).map((e) => [
            e.dataset.key,
            e.dataset.count === "" ? -1 : Number(e.dataset.count),
          ]),
        ),
      );
    const before = await membership();
    const keys = Object.keys(before);
    expect(keys).toContain("refuted");
    // Counts only grow: the page catches up with what /cluster said, and shows no more than it says next.
    await page("A").waitForFunction(
      (b) =>
        Object.entries(b).every(
          ([k, n]) =>
            Number(document.querySelector<HTMLElement>(`#membership [data-key="${k}"]`)?.dataset.count) >= n,
        ),
      before,
      { timeout: LONG, polling: 100 },
    );
    const shown = await onPage();
    const after = await membership();
    expect(Object.keys(shown).sort()).toEqual(keys.sort());
    for (const k of keys) {
      expect(shown[k], k).toBeGreaterThanOrEqual(before[k] as number);
      expect(shown[k], k).toBeLessThanOrEqual(after[k] as number);
    }
    expect(shown.probes).toBeGreaterThan(0);
    expect(await page("A").locator("#membership").isVisible()).toBe(true);
    // A healthy mesh on loopback: no garbage and no forged news. A refutation can happen on a busy
    // machine (a late ack makes a peer suspect A), so it is only held to its highlight: within the
    // test's minutes every rise is inside the 10-min window, so it is lit exactly when not zero.
    for (const k of ["invalid", "implausibleIncarnations"]) expect(shown[k], k).toBe(0);
    const lit = await page("A").evaluate(() => {
      const r = document.querySelector<HTMLElement>('#membership [data-key="refuted"]');
      return {
        refuted: Number(r?.dataset.count),
        alert: r?.dataset.alert,
        alerting: document.querySelectorAll("#membership .alerting").length,
        note: document.getElementById("membership-note")?.textContent,
      };
    });
    if (lit.refuted === 0)
      expect(lit).toMatchObject({ alert: "false", alerting: 0, note: "nothing to alert on" });
    else expect(lit).toMatchObject({ alert: "true", alerting: 1, note: "1 to alert on" });
    expect(problems).toEqual([]);
  });

  it("highlights alerting counts with their rise since the last poll; hidden without SWIM, said under full", async () => {
    // A's own /cluster with its counts moved on the way to the page: refutations and invalid messages
    // rising each poll, a count that is not a number (as text, never markup), and no membership at
    // all (gossip full).
    const p = await d.browser.newPage();
    p.on("pageerror", (e) => problems.push(`membership page error: ${e.message}`));
    let polls = 0;
    // One route for the whole test, its answer chosen by `mode` when it is made: switching routes
    // would let a poll reach the real /cluster in between, or two handlers answer one request.
    let mode: "moved" | "none" | "full" = "moved";
    await p.route("**/cluster", async (route) => {
      const res = await route.fetch();
      const { membership: m, ...v } = (await res.json()) as { membership: Record<string, unknown> };
      polls++;
      const membership = {
        ...m,
        refuted: 2 * polls,
        invalid: polls,
        implausibleIncarnations: "<img src=x id=injected>",
      };
      const json = mode === "moved" ? { ...v, membership } : mode === "none" ? v : { ...v, gossip: "full" };
      await route.fulfill({ response: res, json });
    });
    await p.goto(`${node("A").apiUrl}/?every=${PAGE_EVERY_MS}`);
    const refuted = p.locator('#membership [data-key="refuted"]');
    await p.waitForFunction(
      () => document.querySelector('#membership [data-key="refuted"] .rise') !== null,
      undefined,
      { timeout: LONG, polling: 100 },
    );
    expect(await refuted.getAttribute("class")).toContain("alerting");
    expect(await refuted.getAttribute("data-alert")).toBe("true");
    expect(await refuted.locator(".rise").textContent()).toMatch(/^\+2 · [\d.]+\/s$/);
    expect(await p.textContent("#membership-note")).toBe("2 to alert on");
    // Garbage gossip from an authenticated node alerts too (the peer port's refusals count there).
    const invalid = p.locator('#membership [data-key="invalid"]');
    expect(await invalid.getAttribute("data-alert")).toBe("true");
    expect(await invalid.locator(".rise").textContent()).toMatch(/^\+1 · [\d.]+\/s$/);
    const implausible = p.locator('#membership [data-key="implausibleIncarnations"]');
    expect(await implausible.locator("b").textContent()).toBe("–");
    expect(await implausible.getAttribute("data-alert")).toBe("false");
    expect(await p.locator("#injected").count()).toBe(0);
    // The other counts are the node's own: a suspicion raised is shown, not highlighted.
    expect(await p.locator('#membership [data-key="suspected"]').getAttribute("data-alert")).toBe("false");

    // Without membership (an older node): hidden, with nothing in it (one render, checked at once).
    mode = "none";
    await p.waitForFunction(
      () => {
        const box = document.getElementById("membership");
        return box?.hidden === true && box.querySelectorAll("[data-key]").length === 0;
      },
      undefined,
      { timeout: LONG, polling: 100 },
    );

    // A node under --gossip full says so: the panel says why there is no failure detector.
    mode = "full";
    await p.waitForFunction(
      () => {
        const box = document.getElementById("membership");
        return (
          box?.hidden === false &&
          box.querySelectorAll("[data-key]").length === 0 &&
          (document.getElementById("membership-note")?.textContent ?? "").includes("none under --gossip full")
        );
      },
      undefined,
      { timeout: LONG, polling: 100 },
    );
    // A poll may be inside a route callback now: closing under it would reject its fetch unhandled.
    await p.unrouteAll({ behavior: "ignoreErrors" });
    await p.close();
    expect(problems).toEqual([]);
  });
});
