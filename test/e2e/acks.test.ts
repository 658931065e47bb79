/**
 * The ack path alone, in real processes: two nodes with slow anti-entropy (Δpoll 2 s, so the failure
 * detector needs 6 s of silence) and a 300 ms ack timeout. B is frozen (SIGSTOP) with its sockets
 * open: nothing fails and B was heard from a moment ago, so only the missing forward-ack can tell A.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BLOCK_SIZE } from "../../src/core/block-hash.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { modelOf, postCompletion } from "../api-client.js";
import { type Spawned, spawnCli, waitAllReady, waitFor, words } from "./helpers.js";

describe("forward acks between two node processes", () => {
  const api: string[] = [];
  const procs: Spawned[] = [];
  let model: string;
  const complete = (i: number, prompt: string) =>
    postCompletion(api[i] as string, { model, prompt, max_tokens: 1 });
  const view = async (i: number) =>
    (await (await fetch(`${api[i]}/cluster`)).json()) as {
      stats: { ackTimeouts: number; fallbacks: number };
      peers: { id: string; suspected: boolean; estimateTokens: number }[];
    };

  beforeAll(async () => {
    const ports = await Promise.all([0, 1, 2, 3].map(() => freePort("127.0.0.1")));
    for (const [i, id] of ["A", "B"].entries()) {
      const other = i === 0 ? "B" : "A";
      const otherPeer = ports[i === 0 ? 3 : 1];
      api.push(`http://127.0.0.1:${ports[i * 2]}`);
      procs.push(
        spawnCli([
          "node",
          ...[
            "--id",
            id,
            "--listen",
            `127.0.0.1:${ports[i * 2]}`,
            "--peer-listen",
            `127.0.0.1:${ports[i * 2 + 1]}`,
          ],
          ...["--peers", `${other}=http://127.0.0.1:${otherPeer}`, "--insecure"],
          ...["--engine", "sim", "--sim-time-scale", "0.02", "--policy", "affinity"],
          ...["--poll-ms", "2000", "--forward-ack-timeout-ms", "300", "--log-level", "warn"],
        ]),
      );
    }
    await waitAllReady(api, 30_000, "both nodes ready");
    model = await modelOf(api[0] as string);
  });
  afterAll(async () => {
    for (const p of procs) {
      if (p.child.pid) process.kill(p.child.pid, "SIGCONT");
      p.child.kill("SIGTERM");
    }
    await Promise.all(procs.map((p) => p.exited));
  });

  it("falls back within the ack timeout from a peer that froze, long before suspecting it", async () => {
    const PREFIX = 400;
    const prefix = words("acked", PREFIX);
    expect((await complete(1, `${prefix} warm`)).headers.get("x-prefixmesh-served-by")).toBe("B");
    await waitFor(
      async () => ((await view(0)).peers[0]?.estimateTokens ?? 0) >= PREFIX - BLOCK_SIZE,
      10_000,
      "A to learn B's tree",
    );
    // A forward while B runs: served by B (and the channel to B is open).
    expect((await complete(0, `${prefix} one`)).headers.get("x-prefixmesh-served-by")).toBe("B");
    const b = procs[1]?.child.pid as number;
    process.kill(b, "SIGSTOP");
    try {
      const t0 = performance.now();
      const r = await complete(0, `${prefix} two`);
      const ms = performance.now() - t0;
      expect(r.headers.get("x-prefixmesh-served-by")).toBe("A");
      const v = await view(0);
      expect(v.stats.ackTimeouts).toBe(1);
      expect(v.peers[0]?.suspected).toBe(false); // the failure detector had not noticed yet
      // Sooner than suspicion (3 silent Δpoll) could have moved it, with room for a busy machine.
      expect(ms).toBeLessThan(3 * 2000);
    } finally {
      process.kill(b, "SIGCONT");
    }
  });
});
