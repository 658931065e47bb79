/**
 * A forward sent again (a probe, or a re-send to a peer seen restarted) while its first copy is still
 * tokenized again here (mixed meshes) joins that copy's open stream: it must not re-tokenize, since
 * a failure of its own step would answer every stream of the forward with an error while the first
 * copy goes on to run. The engine is a TEST DOUBLE: the simulator's, whose first tokenize waits on a
 * gate and whose later ones fail.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Tokens } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { waitFor } from "../e2e/helpers.js";
import { postForeignForward } from "./forward-post.js";
import { pair, TestSimEngine } from "./helpers.js";

/** Test double: the first "gated" tokenize waits for `release`; any later one fails at once. */
class GatedTokenizeDouble extends TestSimEngine {
  calls = 0;
  release: () => void = () => {};
  private readonly gate = new Promise<void>((r) => {
    this.release = r;
  });
  override async tokenize(text: string): Promise<Tokens> {
    if (!text.startsWith("gated")) return super.tokenize(text);
    this.calls++;
    if (this.calls > 1) throw new Error("tokenize failed");
    await this.gate;
    return super.tokenize(text);
  }
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
});
