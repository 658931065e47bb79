/**
 * The dashboard browser tests' fixture: Debian's chromium driven by playwright-core (headless,
 * --no-sandbox), against a 3-node sim cluster each test file starts, with a page per node that
 * records what it should not report (CSP violations, script errors, failed loads).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll } from "vitest";
import type { RunningCluster, startCluster as StartCluster } from "../../src/server/cluster/launcher.js";
import { modelOf } from "../api-client.js";
import { clusterTmp, requireBuild } from "./helpers.js";

const CANDIDATES = [
  process.env.CHROMIUM_PATH,
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome",
];
export const CHROMIUM = CANDIDATES.find((p): p is string => p !== undefined && p !== "" && existsSync(p));
const SKIP_REASON = `no chromium found (looked at ${CANDIDATES.filter(Boolean).join(", ")}): install Debian's chromium (apt-get install chromium) or set CHROMIUM_PATH`;
if (!CHROMIUM) console.warn(`dashboard browser test skipped: ${SKIP_REASON}`);
/** The name of every dashboard file's suite, saying why it was skipped when it was. */
export const SUITE = `dashboard in a real browser (3-node sim cluster)${CHROMIUM ? "" : ` — skipped: ${SKIP_REASON}`}`;

/** Δpoll of the test cluster, and the silent polls after which a peer is down (10 s). */
const POLL_MS = 200;
const DOWN_AFTER_POLLS = 50;
/** The page polls twice a second, so the few seconds a crashed peer spends suspected are seen. */
export const PAGE_EVERY_MS = 500;
/** Deadlines are generous: the machine is shared and small. */
export const LONG = 60_000;

/** What a dashboard suite's tests use; set in its beforeAll. */
export interface Dashboard {
  cluster: RunningCluster;
  browser: Browser;
  model: string;
  /** What each page reported that it should not: CSP violations, script errors, failed loads. */
  problems: string[];
  node(id: string): RunningCluster["nodes"][number];
  page(id: string): Page;
  /** A node's row in page `on` has this liveness (data-liveness, set from /cluster's liveness). */
  rowIs(on: string, id: string, liveness: string): Promise<unknown>;
}

/**
 * Starts the cluster and a page per node before the suite's tests, and stops them after. Call it
 * inside the suite's describe. With `open`, each page is loaded and shows three live members first;
 * without, the suite's first test loads them.
 */
export function dashboardCluster(open: boolean): Dashboard {
  let tmp: ReturnType<typeof clusterTmp> | undefined;
  const pages = new Map<string, Page>();
  const d = { problems: [] as string[] } as unknown as Dashboard;
  d.node = (id) => d.cluster.nodes.find((n) => n.id === id) as RunningCluster["nodes"][number];
  d.page = (id) => pages.get(id) as Page;
  d.rowIs = (on, id, liveness) =>
    d
      .page(on)
      .waitForFunction(
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
    d.cluster = await startCluster({
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
    d.model = await modelOf(d.node("A").apiUrl);
    d.browser = await chromium.launch({
      executablePath: CHROMIUM as string,
      headless: true,
      args: ["--no-sandbox"],
    });
    for (const n of d.cluster.nodes) {
      const p = await d.browser.newPage({ viewport: { width: 1360, height: 900 } });
      p.on("console", (m) => {
        // A page whose node was stopped on purpose logs its refused fetches: not a fault of the page.
        if (m.type() === "error" && !/Failed to load resource|net::ERR_/.test(m.text()))
          d.problems.push(`${n.id} console: ${m.text()}`);
      });
      p.on("pageerror", (e) => d.problems.push(`${n.id} page error: ${e.message}`));
      pages.set(n.id, p);
      if (!open) continue;
      await p.goto(`${n.apiUrl}/?every=${PAGE_EVERY_MS}`);
      await p.waitForFunction(
        () => document.querySelectorAll('#members tr[data-liveness="live"]').length === 3,
        undefined,
        { timeout: LONG, polling: 100 },
      );
    }
  }, 240_000);

  afterAll(async () => {
    await d.browser?.close();
    await d.cluster?.stop();
    tmp?.remove();
  });

  return d;
}
