/**
 * A cluster's and a node's life as processes: a shared-secret cluster refuses unsigned peer messages
 * and stops every node on SIGTERM, a cluster started from code cleans up and retries taken ports,
 * nodes outlive no killed launcher, and a node finishes in-flight work on SIGTERM.
 */
import { existsSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { startCluster as StartCluster } from "../../src/server/cluster/launcher.js";
import { modelOf, postCompletion } from "../api-client.js";
import { alive, type ClusterInfo, spawnCli, waitFor, words } from "./helpers.js";
import { simClusterSpawner } from "./sim-cluster-cli.js";

/** The built launcher: it starts the built CLI next to it. */
async function builtLauncher() {
  const launcher = new URL("../../dist/server/cluster/launcher.js", import.meta.url).href;
  return (await import(launcher)) as {
    startCluster: typeof StartCluster;
    freePort: (host: string) => Promise<number>;
  };
}
const TWO_SIM_NODES = {
  nodes: 2,
  engine: "sim",
  model: "generated",
  host: "127.0.0.1",
  sharedSecret: true,
} as const;

const spawnSimCluster = simClusterSpawner();

describe("shared-secret cluster: 401 for unsigned peer messages; SIGTERM leaves no orphans", () => {
  it("refuses unsigned snapshots (401, counted) and stops every node on SIGTERM", async () => {
    const cluster = spawnSimCluster(2, "--poll-ms", "100", "--shared-secret");
    try {
      const info = JSON.parse(await cluster.waitForLine(/"ready":true/, 60_000)) as ClusterInfo;
      expect(info.auth).toBe("shared-secret");
      const b = info.nodes[1]!;
      const r = await fetch(`${b.peerUrl}/peer/snapshot`, {
        method: "POST",
        headers: { "content-type": "application/octet-stream", "x-prefixmesh-sender": "A" },
        body: new Uint8Array([1, 2, 3]),
      });
      expect(r.status).toBe(401);
      const metrics = await (await fetch(`${b.apiUrl}/metrics`)).text();
      expect(metrics).toMatch(/prefixmesh_peer_auth_rejected_total\{[^}]*reason="missing"[^}]*\} 1/);
      const view = (await (await fetch(`${b.apiUrl}/cluster`)).json()) as {
        stats: { snapshotsReceived: { invalid: number } };
      };
      expect(view.stats.snapshotsReceived.invalid).toBe(0);
      for (const n of info.nodes) expect(alive(n.pid)).toBe(true);
      cluster.child.kill("SIGTERM");
      expect(await cluster.exited).toBe(0);
      for (const n of info.nodes) await waitFor(() => !alive(n.pid), 5000, `node ${n.id} to exit`);
      // `prefixmesh cluster` keeps the logs to look at afterwards; the credentials are gone.
      expect(existsSync(join(info.dir, "credentials"))).toBe(false);
      expect(existsSync(join(info.dir, "logs", "A.log"))).toBe(true);
    } finally {
      if (cluster.child.exitCode === null) cluster.child.kill("SIGKILL");
    }
  });

  it("a cluster started from code leaves nothing in the temp dir once stopped", async () => {
    const { startCluster } = await builtLauncher();
    const c = await startCluster(TWO_SIM_NODES);
    let stopped = false;
    try {
      expect(existsSync(join(c.dir, "logs", "A.log"))).toBe(true);
      await c.stop();
      stopped = true;
      expect(existsSync(c.dir)).toBe(false);
    } finally {
      if (!stopped) await c.stop();
    }
  });

  it("starts again on fresh ports when a port it chose is taken before a node binds it", async () => {
    const { startCluster, freePort } = await builtLauncher();
    // Test double for the race: the first port handed out is already held by this test's server.
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, "127.0.0.1", r));
    const takenPort = (taken.address() as AddressInfo).port;
    const picked: number[] = [];
    const lines: string[] = [];
    const pickPort = async (host: string) => {
      const p = picked.length === 0 ? takenPort : await freePort(host);
      picked.push(p);
      return p;
    };
    try {
      const c = await startCluster({ ...TWO_SIM_NODES, pickPort, onLog: (l) => lines.push(l) });
      try {
        expect(lines.some((l) => l.includes("fresh ports"))).toBe(true);
        expect(picked.length).toBe(8); // 2 nodes × 2 ports, twice
        expect(c.nodes.map((n) => n.apiUrl)).not.toContain(`http://127.0.0.1:${takenPort}`);
        const r = await fetch(`${c.nodes[0]?.apiUrl}/ready`);
        expect(r.ok).toBe(true);
      } finally {
        await c.stop();
      }
    } finally {
      taken.close();
    }
  });

  it("nodes exit by themselves when the launcher is killed hard (no orphans)", async () => {
    const cluster = spawnSimCluster(2, "--shared-secret");
    try {
      const info = JSON.parse(await cluster.waitForLine(/"ready":true/, 60_000)) as ClusterInfo;
      cluster.child.kill("SIGKILL");
      await cluster.exited;
      for (const n of info.nodes)
        await waitFor(() => !alive(n.pid), 10_000, `node ${n.id} to exit after its parent died`);
    } finally {
      if (cluster.child.exitCode === null) cluster.child.kill("SIGKILL");
    }
  });

  it("a node finishes in-flight work on SIGTERM before exiting", async () => {
    // Single node (no peers): the sim engine at real time takes ~2.6 s for this 1000-word prompt.
    const node = spawnCli([
      "node",
      "--id",
      "solo",
      "--engine",
      "sim",
      "--listen",
      "127.0.0.1:0",
      "--peer-listen",
      "127.0.0.1:0",
    ]);
    try {
      const line = await node.waitForLine(/"node started"/, 30_000);
      const api = (JSON.parse(line) as { api: string }).api;
      const model = await modelOf(api);
      const pending = postCompletion(api, { model, prompt: words("slow", 1000), max_tokens: 1 });
      // SIGTERM only once the request is in flight (a fixed wait may be too short on a busy machine).
      const inFlight = async () =>
        ((await (await fetch(`${api}/cluster`)).json()) as { inFlightClients: number }).inFlightClients;
      await waitFor(async () => (await inFlight()) > 0, 10_000, "the request to be in flight");
      node.child.kill("SIGTERM");
      const res = await pending;
      expect(res.status).toBe(200);
      expect(await node.exited).toBe(0);
      await expect(fetch(`${api}/health`)).rejects.toThrow();
    } finally {
      if (node.child.exitCode === null) node.child.kill("SIGKILL");
    }
  });
});
