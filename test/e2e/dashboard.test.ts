/**
 * The live dashboard in a real browser: Debian's chromium driven by playwright-core (headless,
 * --no-sandbox), against a 3-node sim cluster this file starts. Every node's page renders under its
 * Content-Security-Policy, the charts move once requests are sent (the share chart mesh-wide, from
 * every member's served count: requests that never entered a node still show on its page), a SIGKILLed node turns suspected
 * then down, a SIGTERMed one shows down, and a killed node's own page says it cannot be reached. The
 * failure detector's panel shows the node's own SWIM counts, highlighting those to alert on.
 * DASHBOARD_SCREENSHOT=docs/dashboard.png saves the screenshot the README shows.
 */
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningCluster, startCluster as StartCluster } from "../../src/server/cluster/launcher.js";
import { modelOf, postCompletion } from "../api-client.js";
import { alive, clusterTmp, requireBuild, waitFor, words } from "./helpers.js";

const CANDIDATES = [
  process.env.CHROMIUM_PATH,
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome",
];
const CHROMIUM = CANDIDATES.find((p): p is string => p !== undefined && p !== "" && existsSync(p));
const SKIP_REASON = `no chromium found (looked at ${CANDIDATES.filter(Boolean).join(", ")}): install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH`;
if (!CHROMIUM) console.warn(`dashboard browser test skipped: ${SKIP_REASON}`);

const SCREENSHOT = process.env.DASHBOARD_SCREENSHOT;
/** Δpoll of the test cluster, and the silent polls after which a peer is down (10 s). */
const POLL_MS = 200;
const DOWN_AFTER_POLLS = 50;
/** The page polls twice a second, so the few seconds a crashed peer spends suspected are seen. */
const PAGE_EVERY_MS = 500;
/** Deadlines are generous: the machine is shared and small. */
const LONG = 60_000;

describe.skipIf(!CHROMIUM)(
  `dashboard in a real browser (3-node sim cluster)${CHROMIUM ? "" : ` — skipped: ${SKIP_REASON}`}`,
  () => {
    let tmp: ReturnType<typeof clusterTmp> | undefined;
    let cluster: RunningCluster;
    let browser: Browser;
    let model: string;
    const pages = new Map<string, Page>();
    /** What each page reported that it should not: CSP violations, script errors, failed loads. */
    const problems: string[] = [];

    const node = (id: string) => cluster.nodes.find((n) => n.id === id) as RunningCluster["nodes"][number];
    const page = (id: string) => pages.get(id) as Page;
    /** A node's row in page `on` has this liveness (data-liveness, set from /cluster's liveness). */
    const rowIs = (on: string, id: string, liveness: string) =>
      page(on).waitForFunction(
        ([id, liveness]) =>
          document.querySelector(`#members tr[data-node="${id}"]`)?.getAttribute("data-liveness") ===
          liveness,
        [id, liveness] as const,
        { timeout: LONG, polling: 100 },
      );

    beforeAll(async () => {
      requireBuild();
      tmp = clusterTmp();
      // The built launcher: it starts the built CLI next to it.
      const launcher = new URL("../../dist/server/cluster/launcher.js", import.meta.url).href;
      const { startCluster } = (await import(launcher)) as { startCluster: typeof StartCluster };
      cluster = await startCluster({
        dir: join(tmp.env.TMPDIR as string, "cluster"),
        nodes: 3,
        engine: "sim",
        model: "generated",
        host: "127.0.0.1",
        sharedSecret: true,
        // The paper's Algorithm 1: prefixes held elsewhere are forwarded, so the share chart moves.
        policy: "affinity",
        pollMs: POLL_MS,
        simTimeScale: 0.02,
        extraArgs: ["--down-after-polls", String(DOWN_AFTER_POLLS)],
      });
      model = await modelOf(node("A").apiUrl);
      browser = await chromium.launch({
        executablePath: CHROMIUM as string,
        headless: true,
        args: ["--no-sandbox"],
      });
      for (const n of cluster.nodes) {
        const p = await browser.newPage({ viewport: { width: 1360, height: 900 } });
        p.on("console", (m) => {
          // A page whose node was stopped on purpose logs its refused fetches: not a fault of the page.
          if (m.type() === "error" && !/Failed to load resource|net::ERR_/.test(m.text()))
            problems.push(`${n.id} console: ${m.text()}`);
        });
        p.on("pageerror", (e) => problems.push(`${n.id} page error: ${e.message}`));
        pages.set(n.id, p);
      }
    }, 240_000);

    afterAll(async () => {
      await browser?.close();
      await cluster?.stop();
      tmp?.remove();
    });

    it("renders on every node: three members live, no CSP violation or script error", async () => {
      for (const n of cluster.nodes) {
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
        cluster.nodes.map((n) =>
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
      const p = await browser.newPage();
      p.on("pageerror", (e) => problems.push(`refused page error: ${e.message}`));
      const evil = "<img src=x id=injected>";
      const refused = Array.from({ length: 7 }, (_, i) => ({
        id: i === 0 ? "X" : `R${i}`,
        reason:
          i === 0 ? `wrong-cluster: peer 'X' belongs to cluster '${evil}', not 'test'` : "wrong-model: m",
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
              Number(document.querySelector<HTMLElement>(`#membership [data-key="${k}"]`)?.dataset.count) >=
              n,
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
      const p = await browser.newPage();
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
            (document.getElementById("membership-note")?.textContent ?? "").includes(
              "none under --gossip full",
            )
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

    it("the charts update after requests are sent", async () => {
      // Three topics, each a long shared prefix: topic k enters first at node k (which keeps it),
      // then at every other node in turn, which affinity routing forwards to its holder.
      const prompts = Array.from({ length: 27 }, (_, i) => {
        const topic = `t${i % 3}_`;
        return `${words(topic, 300)} ${words(`q${i}_`, 20)}`;
      });
      const send = async (i: number) => {
        const entry = cluster.nodes[(i + Math.floor(i / 3)) % 3] as RunningCluster["nodes"][number];
        const r = await postCompletion(entry.apiUrl, { model, prompt: prompts[i], max_tokens: 4 });
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
        for (const n of cluster.nodes)
          out[n.id] = ((await (await fetch(`${n.apiUrl}/cluster`)).json()) as { served: number }).served;
        return out;
      };
      const before = await ownServed();
      const SOLO = 6;
      for (let i = 0; i < SOLO; i++) {
        const entry = node(i % 2 === 0 ? "B" : "C");
        const r = await postCompletion(entry.apiUrl, {
          model,
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

    it("a node killed with SIGKILL turns suspected, then down; its own page says it cannot be reached", async () => {
      const c = node("C");
      process.kill(c.pid as number, "SIGKILL");
      await waitFor(() => !alive(c.pid), 10_000, "C to exit");
      await rowIs("A", "C", "suspected");
      await rowIs("A", "C", "down");
      // The stale estimate is not shown as a current size.
      expect(await page("A").locator('#members tr[data-node="C"] td:nth-child(5)').textContent()).toMatch(
        /^stale/,
      );
      expect(await page("A").locator("#alerts .alert.down").textContent()).toContain("Peer C is down");
      // A's failure detector counted the suspicion of C (its own, or one it took from gossip).
      await page("A").waitForFunction(
        () =>
          Number(document.querySelector<HTMLElement>('#membership [data-key="suspected"]')?.dataset.count) >=
          1,
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
        peers: { id: string; liveness: string }[];
      };
      expect(v.peers.find((p) => p.id === "B")?.liveness).toBe("down");
      expect(problems).toEqual([]);
    }, 120_000);
  },
);
