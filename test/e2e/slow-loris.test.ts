/**
 * Slow loris against a real node process: 1,100 connections from one address (127.0.0.2) that send
 * their headers a line a second, or nothing, reopened whenever the node closes them, while another
 * client (127.0.0.1) sends completions. Every one of that client's requests is answered; the attacker
 * is held to its address's share (429 beyond it) and its admitted sockets are cut off when idle or
 * slow (shortened timeouts here, so the test sees them recycle).
 */
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { processUse, refusedCount, runClient, startSlowLoris } from "../../src/bench/slow-loris.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { type Spawned, spawnCli, waitFor } from "./helpers.js";

/** Whether a client socket can bind 127.0.0.2 here (Linux routes all of 127/8 to loopback). */
async function canBind(address: string): Promise<boolean> {
  const probe = await freePort("127.0.0.1");
  const { createServer } = await import("node:net");
  const srv = createServer((s) => s.destroy());
  await new Promise<void>((r) => srv.listen(probe, "127.0.0.1", r));
  try {
    return await new Promise<boolean>((resolve) => {
      const s = connect({ port: probe, host: "127.0.0.1", localAddress: address });
      s.once("connect", () => {
        resolve(s.localAddress === address);
        s.destroy();
      });
      s.once("error", () => resolve(false));
    });
  } finally {
    await new Promise((r) => srv.close(r));
  }
}

const haveSecondLoopback = await canBind("127.0.0.2");
if (!haveSecondLoopback) console.log("skipped slow-loris test: cannot bind a client socket to 127.0.0.2");

describe.skipIf(!haveSecondLoopback)("slow loris from one address against a node", () => {
  let node: Spawned;
  let url: string;
  const SOCKETS = 1100;
  const IDLE_MS = 1500;
  const HEADERS_MS = 3000;

  beforeAll(async () => {
    const [api, peer] = [await freePort("127.0.0.1"), await freePort("127.0.0.1")];
    url = `http://127.0.0.1:${api}`;
    node = spawnCli([
      "node",
      ...["--id", "A", "--listen", `127.0.0.1:${api}`, "--peer-listen", `127.0.0.1:${peer}`],
      ...["--engine", "sim", "--sim-time-scale", "0.02", "--log-level", "warn"],
      ...["--connection-idle-timeout-ms", String(IDLE_MS), "--headers-timeout-ms", String(HEADERS_MS)],
    ]);
    await waitFor(
      () =>
        fetch(`${url}/ready`).then(
          (r) => r.ok,
          () => false,
        ),
      30_000,
      "the node to be ready",
    );
  });
  afterAll(async () => {
    node?.child.kill("SIGTERM");
    await node?.exited;
  });

  it("answers every request of another client while 1,100 sockets from one address stall", async () => {
    const pid = node.child.pid as number;
    const before = processUse(pid);
    const attack = startSlowLoris({
      host: "127.0.0.1",
      port: Number(new URL(url).port),
      from: "127.0.0.2",
      sockets: SOCKETS,
      dripMs: 1000,
      silentShare: 0.5,
      maxReopens: 50_000,
    });
    let peakRss = before?.rssMiB ?? 0;
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, processUse(pid)?.rssMiB ?? 0);
    }, 200);
    try {
      // The default share is an eighth of --max-connections (1024): the rest must have been refused.
      await waitFor(
        async () => (await refusedCount(url, "per-address")) >= SOCKETS - 128,
        60_000,
        "the node to refuse the attacker's connections beyond its share",
      );
      // Batches of requests until the node has cut admitted attackers off both ways (idle, slow
      // headers) and so handed their places to new ones: the client is measured across that.
      const runs = [];
      const deadline = Date.now() + 90_000;
      do {
        runs.push(await runClient(url, 50, { timeoutMs: 20_000 }));
        expect(Date.now()).toBeLessThan(deadline);
      } while (
        runs.length < 4 ||
        (await refusedCount(url, "idle")) === 0 ||
        (await refusedCount(url, "timeout")) === 0
      );
      const sent = runs.reduce((n, r) => n + r.sent, 0);
      const answered = runs.reduce((n, r) => n + r.answered, 0);
      const failures = runs.flatMap((r) => Object.entries(r.failures));
      expect(failures).toEqual([]);
      expect(answered).toBe(sent);
      const s = attack.stats();
      expect(s.statuses["429"] ?? 0).toBeGreaterThanOrEqual(SOCKETS - 128);
      expect(s.statuses["408"] ?? 0).toBeGreaterThan(0); // slow headers answered, then closed
      expect(s.statuses["400"]).toBeUndefined(); // the attack itself is well-formed, only slow
      const lat = runs.flatMap((r) => r.latencies).sort((a, b) => a - b);
      console.log(
        `slow loris: ${answered}/${sent} answered, p50 ${lat[Math.floor(lat.length / 2)]?.toFixed(1)} ms, ` +
          `max ${lat.at(-1)?.toFixed(1)} ms; attacker ${s.opened} opened, answers ${JSON.stringify(s.statuses)}; ` +
          `node RSS ${before?.rssMiB.toFixed(0)} → peak ${peakRss.toFixed(0)} MiB`,
      );
      // Memory stays bounded: refused sockets hold nothing, admitted ones a parser each.
      if (before) expect(peakRss - before.rssMiB).toBeLessThan(200);
    } finally {
      clearInterval(sampler);
      await attack.stop();
    }
    // Once the attack stops the node serves as before.
    expect((await runClient(url, 5)).answered).toBe(5);
  });
});
