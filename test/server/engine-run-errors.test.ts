/**
 * A failed engine run's text reaches clients and peers (`engine: …`): bounded and without the
 * credentials an engine URL may carry, as a failed tokenize step's is (engine-step-errors.ts).
 */
import { describe, expect, it } from "vitest";
import type { Engine, EngineRequest } from "../../src/core/engine.js";
import type { NodeInput } from "../../src/core/node/types.js";
import { createMetrics } from "../../src/server/metrics.js";
import { EngineRuns } from "../../src/server/runtime/engine-runs.js";
import { waitFor } from "../e2e/helpers.js";

const quiet = { info() {}, warn() {}, error() {}, debug() {} };

describe("a failed engine run's error text", () => {
  it("keeps a URL's path only (no host or credentials) and is bounded", async () => {
    const engine = {
      info: { cacheMode: "lru" },
      run: async () => {
        throw new Error(`POST http://user:secret@h:1/v1/completions failed: ${"x".repeat(1000)}`);
      },
    } as unknown as Engine;
    const fed: NodeInput[] = [];
    const runs = new EngineRuns({
      engine,
      metrics: createMetrics("A", { processMetrics: false }),
      logger: quiet,
      feed: (i) => fed.push(i),
      relay: () => {},
      forPeer: () => false,
    });
    const request = { id: "r", tokens: Uint32Array.of(1), maxTokens: 1 } as EngineRequest;
    runs.start("j1", request, []);
    await waitFor(() => fed.length === 1, 10_000, "the run's failure");
    const f = fed[0] as Extract<NodeInput, { type: "engine-failed" }>;
    expect(f.type).toBe("engine-failed");
    expect(f.error).not.toMatch(/secret|h:1/);
    expect(f.error).toMatch(/^POST \/v1\/completions failed: x+…$/);
    expect(`engine: ${f.error}`.length).toBeLessThanOrEqual(300);
  });
});
