/**
 * The cold start in the daemon's configuration: every cache empty while open-loop arrivals keep
 * coming, so every node's queue passes the push-back threshold and every node pushes back. With
 * `pushBackByCache` (a daemon default) a request whose prefix only a pushing-back peer holds still
 * goes there when the prefill it saves outweighs that peer's longer queue; off (queue depths alone),
 * it computes the prefix again on its own busy node. Fixed seed: fewer cold prefills, a shorter tail.
 */
import { describe, expect, it } from "vitest";
import { DAEMON_NODE_DEFAULTS } from "../../src/core/node/config.js";
import { coldPrefills, coldStartRun, expectCleanRun, p99 } from "./cold-start-fixture.js";

describe("cold start: push-back weighs what a peer's cache saves", () => {
  it("computes fewer prefixes twice and shortens the tail", { timeout: 120_000 }, () => {
    expect(DAEMON_NODE_DEFAULTS.pushBackByCache).toBe(true);
    const on = coldStartRun({ pushBackByCache: true });
    const off = coldStartRun({ pushBackByCache: false });
    for (const r of [on, off]) expectCleanRun(r);
    // Queues grew seconds long (past the push-back threshold): the cold start is what is measured.
    expect(Math.max(...off.records.map((x) => x.queueMs))).toBeGreaterThan(5_000);
    expect(coldPrefills(on)).toBeLessThan(coldPrefills(off));
    expect(p99(on)).toBeLessThan(p99(off));
  });
});
