/**
 * A node frozen (SIGSTOP) while its peer forwards to it: the origin falls back at the ack timeout and
 * cancels. After SIGCONT the frozen node reads the forwards and the cancels that piled up on its
 * sockets; it must not run the forwards its origin gave up on (the cancel travels behind the forward,
 * on the same forward channel, and the channel hands a forward to the node only after the rest of
 * what arrived with it). Two sim-engine node processes on 127.0.0.1, policy affinity, the daemon's
 * gossip mode: A keeps forwarding to F while frozen until SWIM's failed probes make it suspect F (the
 * first forward always goes; Δpoll 3 s keeps the full mesh, 3 silent polls, from suspecting F sooner).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BLOCK_SIZE } from "../../src/core/block-hash.js";
import { modelOf, postCompletion } from "../api-client.js";
import { waitFor, words } from "./helpers.js";
import { type SimNodes, startSimNodes } from "./sim-nodes.js";

const PREFIX = 200;
const FROZEN_REQUESTS = 3;

interface Stats {
  servedForPeers: number;
  cancelledForwards: number;
  expiredForwards: number;
  duplicateForwards: number;
}

describe("a node frozen and resumed", () => {
  let nodes: SimNodes;
  let model: string;
  const stats = async (i: number) =>
    ((await (await fetch(`${nodes.api[i]}/cluster`)).json()) as { stats: Stats }).stats;
  const forwardedBy = async (i: number) =>
    ((await (await fetch(`${nodes.api[i]}/cluster`)).json()) as { stats: { forwarded: number } }).stats
      .forwarded;
  const complete = async (i: number, prompt: string) => {
    const r = await postCompletion(nodes.api[i] as string, { model, prompt, max_tokens: 8 });
    await r.arrayBuffer();
    return { status: r.status, servedBy: r.headers.get("x-prefixmesh-served-by") };
  };
  const prefix = (i: number) => words(`frz${i}w`, PREFIX);

  beforeAll(async () => {
    nodes = await startSimNodes(["A", "F"], () => ["--policy", "affinity", "--poll-ms", "3000"]);
    model = await modelOf(nodes.api[0] as string);
  }, 90_000);
  afterAll(async () => {
    const f = nodes?.procs[1]?.child.pid;
    if (f) process.kill(f, "SIGCONT");
    await nodes?.stop();
  });

  it("does not run, after SIGCONT, the forwards its origin gave up on", async () => {
    for (let i = 0; i <= FROZEN_REQUESTS; i++)
      expect((await complete(1, `${prefix(i)} warm`)).servedBy).toBe("F");
    await waitFor(
      async () => {
        const v = (await (await fetch(`${nodes.api[0]}/cluster`)).json()) as {
          peers: { estimateTokens: number }[];
        };
        return (v.peers[0]?.estimateTokens ?? 0) >= (FROZEN_REQUESTS + 1) * (PREFIX - BLOCK_SIZE);
      },
      15_000,
      "A to learn F's prefixes",
    );
    // A forward while F runs: the channel to F is open.
    expect((await complete(0, `${prefix(0)} open`)).servedBy).toBe("F");
    const before = await stats(1);
    const sentBefore = await forwardedBy(0);
    const pid = nodes.procs[1]?.child.pid as number;
    process.kill(pid, "SIGSTOP");
    try {
      for (let i = 1; i <= FROZEN_REQUESTS; i++) {
        const r = await complete(0, `${prefix(i)} while frozen`);
        expect(r.status).toBe(200);
        expect(r.servedBy).toBe("A");
      }
    } finally {
      process.kill(pid, "SIGCONT");
    }
    // Forwards A sent F while it was frozen: at least the first (SWIM suspects F only after failed
    // probe periods, longer than one ack timeout); the later ones may stay local once F is suspected.
    const frozenForwards = (await forwardedBy(0)) - sentBefore;
    expect(frozenForwards).toBeGreaterThanOrEqual(1);
    expect(frozenForwards).toBeLessThanOrEqual(FROZEN_REQUESTS);
    // F deals with every forward that piled up: dropped (cancelled or expired), never run.
    let after = before;
    await waitFor(
      async () => {
        after = await stats(1);
        const dealt =
          after.servedForPeers -
          before.servedForPeers +
          after.cancelledForwards -
          before.cancelledForwards +
          after.expiredForwards -
          before.expiredForwards;
        return dealt >= frozenForwards;
      },
      20_000,
      "F to deal with the forwards sent while it was frozen",
    );
    console.log(
      `frozen: after SIGCONT F ran ${after.servedForPeers - before.servedForPeers} of ${frozenForwards} abandoned ` +
        `forwards, dropped ${after.cancelledForwards - before.cancelledForwards} as cancelled, ` +
        `${after.expiredForwards - before.expiredForwards} as expired`,
    );
    expect(after.servedForPeers).toBe(before.servedForPeers);
  }, 90_000);
});
