/**
 * The open-loop cold start in the daemon's configuration, with and without `recentPrefixMs` (a
 * daemon default): a prompt queued or forwarded lately counts as cached where it went, so a second
 * request for a prefix still queued follows the first instead of computing it cold elsewhere. Fixed
 * seed: fewer cold prefills, a shorter tail; nothing lost, nothing answered twice.
 */
import { describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import { coldPrefills, coldStartRun, expectCleanRun, p99 } from "./cold-start-fixture.js";

describe("cold start: a prefix queued or forwarded lately counts where it went", () => {
  it("computes fewer prefixes twice and shortens the tail", { timeout: 120_000 }, () => {
    expect(DAEMON_NODE_DEFAULTS.recentPrefixMs).toBeGreaterThan(0);
    const on = coldStartRun({ recentPrefixMs: DAEMON_NODE_DEFAULTS.recentPrefixMs });
    const off = coldStartRun({ recentPrefixMs: 0 });
    for (const r of [on, off]) expectCleanRun(r);
    // Queues grew seconds long: the cold start is what is measured.
    expect(Math.max(...off.records.map((x) => x.queueMs))).toBeGreaterThan(5_000);
    expect(coldPrefills(on)).toBeLessThan(coldPrefills(off));
    expect(p99(on)).toBeLessThan(p99(off));
  });
});
