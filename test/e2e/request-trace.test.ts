/**
 * One request followed across two node processes by its `x-request-id`: the entry node's `request`
 * line and the serving node's `forward served` line carry the same id (it travels on the forward).
 * Then a peer's crash, as the other node's log shows it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BLOCK_SIZE } from "../../src/core/block-hash.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { modelOf } from "../api-client.js";
import { type Spawned, spawnCli, waitAllReady, waitFor, words } from "./helpers.js";

describe("x-request-id across nodes (two processes)", () => {
  const api: string[] = [];
  const procs: Spawned[] = [];
  let model: string;
  const complete = (i: number, prompt: string, id?: string) =>
    fetch(`${api[i]}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(id ? { "x-request-id": id } : {}) },
      body: JSON.stringify({ model, prompt, max_tokens: 1 }),
    });
  /** The JSON log lines a node printed so far. */
  const logOf = (i: number) =>
    (procs[i]?.output().split("--- stderr ---")[0] ?? "")
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  /** The first line of node i's log from line `from` on that satisfies `pred`, once printed. */
  const findLine = async (
    i: number,
    pred: (l: Record<string, unknown>) => boolean,
    what: string,
    from = 0,
  ) => {
    let found: Record<string, unknown> | undefined;
    await waitFor(
      () => {
        found = logOf(i).slice(from).find(pred);
        return found !== undefined;
      },
      10_000,
      what,
    );
    return found as Record<string, unknown>;
  };

  beforeAll(async () => {
    const ports = await Promise.all([0, 1, 2, 3].map(() => freePort("127.0.0.1")));
    for (const [i, id] of ["A", "B"].entries()) {
      const other = i === 0 ? "B" : "A";
      api.push(`http://127.0.0.1:${ports[i * 2]}`);
      procs.push(
        spawnCli([
          "node",
          ...["--id", id, "--listen", `127.0.0.1:${ports[i * 2]}`],
          ...["--peer-listen", `127.0.0.1:${ports[i * 2 + 1]}`],
          ...["--peers", `${other}=http://127.0.0.1:${ports[i === 0 ? 3 : 1]}`, "--insecure"],
          ...["--engine", "sim", "--sim-time-scale", "0.02", "--policy", "affinity"],
          ...["--poll-ms", "500", "--forward-ack-timeout-ms", "10000", "--log-level", "info"],
        ]),
      );
    }
    await waitAllReady(api, 30_000, "both nodes ready");
    model = await modelOf(api[0] as string);
  });
  afterAll(async () => {
    for (const p of procs) p.child.kill("SIGTERM");
    await Promise.all(procs.map((p) => p.exited));
  });

  it("logs a forwarded request under the client's id at the entry node and at the serving node", async () => {
    const PREFIX = 300;
    const prefix = words("traced", PREFIX);
    expect((await complete(1, `${prefix} warm`)).status).toBe(200);
    await waitFor(
      async () => {
        const v = (await (await fetch(`${api[0]}/cluster`)).json()) as {
          peers: { estimateTokens: number; liveness: string }[];
        };
        return v.peers[0]?.liveness === "live" && (v.peers[0]?.estimateTokens ?? 0) >= PREFIX - BLOCK_SIZE;
      },
      15_000,
      "A to learn B's tree, and see B live",
    );
    const id = "trace-e2e-0001";
    const r = await complete(0, `${prefix} routed`, id);
    expect(r.status).toBe(200);
    expect(r.headers.get("x-request-id")).toBe(id);
    expect(r.headers.get("x-prefixmesh-served-by")).toBe("B");
    const atA = await findLine(0, (l) => l.msg === "request" && l.requestId === id, "A's request line");
    expect(atA).toMatchObject({ node: "A", status: 200, model, servedBy: "B", hops: 1 });
    expect(atA.cachedTokens as number).toBeGreaterThanOrEqual(PREFIX - BLOCK_SIZE);
    const atB = await findLine(
      1,
      (l) => l.msg === "forward served" && l.requestId === id,
      "B's forward line",
    );
    expect(atB).toMatchObject({ node: "B", from: "A" });
    expect(atB.cachedTokens).toBe(atA.cachedTokens);
  });

  it("logs a refused request (4xx) with its status and code", async () => {
    const r = await fetch(`${api[0]}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "trace-e2e-404" },
      body: JSON.stringify({ model: "no-such-model", prompt: "x" }),
    });
    expect(r.status).toBe(404);
    const l = await findLine(0, (x) => x.requestId === "trace-e2e-404", "A's line for the 404");
    expect(l).toMatchObject({
      msg: "request",
      status: 404,
      error: "model_not_found",
      model: "no-such-model",
    });
  });

  it("logs a peer that crashed (SIGKILL) as suspected", async () => {
    // Only what A logs after the kill (A may have suspected B once already while B was starting).
    const before = logOf(0).length;
    procs[1]?.child.kill("SIGKILL");
    const l = await findLine(
      0,
      (x) => x.msg === "peer suspected" && x.peer === "B",
      "A's 'peer suspected' after the kill",
      before,
    );
    expect(l).toMatchObject({ level: 40, node: "A", liveness: "suspected", was: "live" });
  });
});
