/**
 * `POST /admin/reset-cache` with an engine whose cache reset takes time: a client request arriving
 * meanwhile is refused (503, retryable) before its prompt is tokenized, rather than taken and then
 * dropped by the restart that follows, and a second reset is refused (409); afterwards the node
 * serves again.
 */
import { afterEach, expect, it } from "vitest";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { soloNode, TestSimEngine } from "./helpers.js";

/** A sim engine whose cache the engine manages, and whose reset waits until the test lets it go. */
class SlowResetEngine extends TestSimEngine {
  resets = 0;
  /** Prompts tokenized: one refused up front never reaches the engine. */
  tokenized = 0;
  private gate: (() => void) | undefined;
  constructor() {
    super();
    (this as { info: TestSimEngine["info"] }).info = { ...this.info, cacheMode: "engine-managed" };
  }
  async resetCache(): Promise<void> {
    this.resets++;
    await new Promise<void>((go) => {
      this.gate = go;
    });
    this.cache.clear();
  }
  override async tokenize(text: string) {
    this.tokenized++;
    return super.tokenize(text);
  }
  letResetFinish(): void {
    this.gate?.();
  }
  get resetWaiting(): boolean {
    return this.gate !== undefined;
  }
}

let node: NodeHandle | undefined;
afterEach(async () => {
  await node?.stop();
  node = undefined;
});

it("refuses clients while the engine empties its cache, then serves in the new epoch", async () => {
  const engine = new SlowResetEngine();
  const { node: n, model } = await soloNode(engine);
  node = n;
  const post = () =>
    fetch(`${n.apiUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt: "a question", max_tokens: 2 }),
    }).then(async (r) => ({ status: r.status, body: await r.text(), retry: r.headers.get("retry-after") }));
  expect((await post()).status).toBe(200);
  const epoch = n.runtime.clusterView().epoch;

  const reset = n.runtime.resetCache();
  for (const t0 = Date.now(); !engine.resetWaiting; await new Promise((r) => setTimeout(r, 10)))
    if (Date.now() - t0 > 10_000) throw new Error("the reset never reached the engine");
  const tokenized = engine.tokenized;
  const during = await post();
  // Refused at admission, before its prompt is tokenized.
  expect(engine.tokenized).toBe(tokenized);
  expect(during.status).toBe(503);
  expect(during.body).toContain("resetting");
  expect(during.retry).toBe("1");
  await expect(n.runtime.resetCache()).rejects.toMatchObject({ status: 409 });
  expect(engine.resets).toBe(1);

  engine.letResetFinish();
  await reset;
  expect(n.runtime.clusterView().epoch).toBeGreaterThan(epoch);
  expect((await post()).status).toBe(200);
}, 30_000);
