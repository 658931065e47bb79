/**
 * A forward sent again (a probe, or a re-send to a peer seen restarted) while its first copy is still
 * tokenized again here (mixed meshes) joins that copy's open stream: it must not re-tokenize, since
 * a failure of its own step would answer every stream of the forward with an error while the first
 * copy goes on to run. The engine is a TEST DOUBLE: the simulator's, whose first tokenize waits on a
 * gate and whose later ones fail.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineRequest, EvictedRun, Tokens } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { waitFor } from "../e2e/helpers.js";
import { fetchForeignForward, finalMsg, postForeignForward } from "./forward-post.js";
import { openForwards, pair, TestSimEngine } from "./helpers.js";

/**
 * Test double: the first "gated" tokenize waits for `release`; any later one fails at once. A run of
 * a "slow" prompt takes long enough for a copy to arrive while it runs.
 */
class GatedTokenizeDouble extends TestSimEngine {
  calls = 0;
  release: () => void = () => {};
  private readonly gate = new Promise<void>((r) => {
    this.release = r;
  });
  override async tokenize(text: string): Promise<Tokens> {
    if (!text.startsWith("gated") && !text.startsWith("slow")) return super.tokenize(text);
    this.calls++;
    if (this.calls > 1) throw new Error("tokenize failed");
    if (text.startsWith("gated")) await this.gate;
    return super.tokenize(text);
  }
  override execute(req: EngineRequest, evicted: readonly EvictedRun[]) {
    const run = super.execute(req, evicted);
    if (req.prompt?.startsWith("slow")) run.result.decodeMs = 2_000_000; // 2 s at this time scale
    return run;
  }
}

/** The first copy's request of `reqId` from B, while its stream is open (white-box, as below). */
function firstOf(node: NodeHandle, reqId: string): EngineRequest | undefined {
  const served = (node.runtime as unknown as { served: { open: Map<string, { request: EngineRequest }> } })
    .served;
  return served.open.get(`B|${reqId}|0`)?.request;
}

/** Copies joined to the open stream of `reqId` from B (white-box: ServedForwards' private map). */
function copiesOf(node: NodeHandle, reqId: string): number {
  const served = (node.runtime as unknown as { served: { open: Map<string, { resent?: unknown[] }> } })
    .served;
  return served.open.get(`B|${reqId}|0`)?.resent?.length ?? 0;
}

describe("a forward sent again while it is re-tokenized", () => {
  let a: NodeHandle;
  let b: NodeHandle;
  const engine = new GatedTokenizeDouble();
  beforeAll(async () => {
    [a, b] = await pair({ simTimeScale: "0.001", mixedModels: true }, { A: engine });
  });
  afterAll(async () => {
    engine.release();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it("is answered by its first copy's run, not failed by its own step", async () => {
    const first = postForeignForward(a, "copied", { prompt: "gated question" }, 10_000);
    await waitFor(() => engine.calls === 1, 10_000, "the first copy's tokenize");
    const copy = postForeignForward(a, "copied", { prompt: "gated question" }, 10_000);
    // The copy joined (fixed), or its own step failed it and the first (the bug): either way, now.
    await waitFor(() => copiesOf(a, "copied") === 1 || engine.calls > 1, 10_000, "the copy taken in");
    engine.release();
    const [m1, m2] = await Promise.all([first, copy]);
    expect(m1.type).toBe("result");
    expect(m2.type).toBe("result");
    expect(engine.calls).toBe(1);
  });

  it("once its first copy runs, is acked again on its own stream and answered with it", async () => {
    engine.calls = 0;
    const first = postForeignForward(a, "running", { prompt: "slow question" }, 20_000);
    await waitFor(() => firstOf(a, "running")?.tokenizer === undefined && engine.calls === 1, 10_000, "run");
    const res = await fetchForeignForward(
      a,
      "running",
      { prompt: "slow question" },
      AbortSignal.timeout(20_000),
    );
    // Its ack (the response headers) came while the first copy still runs: its stream is still open.
    expect(openForwards(a)).toBe(1);
    const [m1, m2] = await Promise.all([first, finalMsg(res)]);
    expect(m1.type).toBe("result");
    expect(m2.type).toBe("result");
    expect(engine.calls).toBe(1);
  });
});
