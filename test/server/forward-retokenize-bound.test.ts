/**
 * Peers' forwards tokenized again here (mixed models) are bounded in count apart from `--max-pending`:
 * a step past `--tokenize-timeout-ms` that the engine still runs holds a `--max-peer-tokenizing`
 * place, never a client's, and past that bound a forward is refused as busy (fault `load`), so its
 * origin falls back at once. The engine is a TEST DOUBLE: the simulator's, whose tokenize of a text
 * starting "hang" ignores its abort and waits until the test releases it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { postForeignForward } from "./forward-post.js";
import { openForwards, pair } from "./helpers.js";
import { peerTokenizing } from "./retokenize-counts.js";
import { SignalIgnoringDouble } from "./signal-ignoring-double.js";

describe("peers' forwards tokenized here, bounded apart from clients", () => {
  let a: NodeHandle;
  let b: NodeHandle;
  // Its tokenize of a text starting "hang" waits until the test releases it.
  const engine = new SignalIgnoringDouble((text) => text.startsWith("hang"));
  beforeAll(async () => {
    const settings = { simTimeScale: "0.001", mixedModels: true, tokenizeTimeoutMs: "300" };
    const own = { A: { maxPending: "1", maxPeerTokenizing: "1" } };
    [a, b] = await pair(settings, { A: engine }, own);
  });
  afterAll(async () => {
    engine.release();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it("an overdue forward's step takes no client place, and past the bound forwards are refused", async () => {
    const timedOut = await postForeignForward(a, "hung", { prompt: "hang here" }, 10_000);
    expect(timedOut.fault).toBe("engine");
    expect(timedOut.error).toContain("--tokenize-timeout-ms");
    expect(engine.held.length).toBe(1);
    expect(peerTokenizing(a)).toBe(1);
    // With --max-pending 1, the overdue peer step counted as a client's would refuse this with 429.
    const model = a.nodeConfig.models[0];
    const r = await fetch(`${a.apiUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt: "a question", max_tokens: 2 }),
    });
    expect(r.status, await r.text()).toBe(200);
    // The peer bound is full: refused as busy at once, a back-off for the origin, its stream freed.
    const refused = await postForeignForward(a, "busy", { prompt: "a question" }, 10_000);
    expect(refused.type).toBe("error");
    expect(refused.fault).toBe("load");
    expect(refused.error).toMatch(/^overloaded: .*--max-peer-tokenizing/);
    expect(openForwards(a)).toBe(0);
    expect(engine.held.length).toBe(1);
    // Once the engine ends the step, its place is free again.
    engine.release();
    const deadline = Date.now() + 10_000;
    while (peerTokenizing(a) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(peerTokenizing(a)).toBe(0);
    const served = await postForeignForward(a, "after", { prompt: "a question" }, 10_000);
    expect(served.type).toBe("result");
  }, 30_000);
});
