/**
 * A peer's forward still being tokenized again here (mixed models) when the shutdown drain ends: the
 * drain answers its stream "shutting down" (no mark against this node) and aborts its engine call, and
 * that abort is no refusal of the forward's prompt: `prefixmesh_forwards_refused_total{reason="tokenize"}`
 * stays as it was. The engine is a TEST DOUBLE: the simulator's, whose tokenize of a text starting
 * "hang" answers only its signal's abort (as a remote engine's aborted HTTP request ends).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Tokens } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { fetchForeignForward, finalMsg } from "./forward-post.js";
import { mixedPair, TestSimEngine } from "./helpers.js";
import { refusedFor } from "./retokenize-counts.js";

/** Test double: the simulator's engine whose "hang" tokenizes end only by their signal's abort. */
class AbortOnlyDouble extends TestSimEngine {
  aborted = 0;
  override async tokenize(text: string, signal?: AbortSignal): Promise<Tokens> {
    if (!text.startsWith("hang")) return super.tokenize(text);
    return new Promise<Tokens>((_go, fail) =>
      signal?.addEventListener("abort", () => {
        this.aborted++;
        fail(new Error("aborted"));
      }),
    );
  }
}

function internals(node: NodeHandle): { steps: { peerOpen: number } } {
  return node.runtime as unknown as { steps: { peerOpen: number } };
}

describe("a forward being tokenized again when the drain ends", () => {
  let a: NodeHandle;
  let b: NodeHandle;
  const engine = new AbortOnlyDouble();
  beforeAll(async () => {
    // The bound far past the drain: only the drain's end can end the step.
    [a, b] = await mixedPair(engine, { A: { drainSec: "0.2" } });
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it("is answered shutting down, its call aborted, and not counted as a tokenize refusal", async () => {
    // Its headers come with its first record: not before the drain answers it.
    const res = fetchForeignForward(a, "draining", { prompt: "hang here" }, AbortSignal.timeout(10_000));
    const deadline = Date.now() + 10_000;
    while (internals(a).steps.peerOpen === 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(internals(a).steps.peerOpen).toBe(1);
    const before = await refusedFor(a, "tokenize");
    await a.stop();
    const msg = await finalMsg(await res);
    expect(msg.type).toBe("error");
    expect(msg.error).toBe("shutting down");
    expect(msg.fault).toBeUndefined();
    expect(engine.aborted).toBe(1);
    expect(internals(a).steps.peerOpen).toBe(0);
    expect(await refusedFor(a, "tokenize")).toBe(before);
  }, 30_000);
});
