/**
 * A streamed answer whose origin probes its live serving peer meanwhile (answer recovery re-sends the
 * forward): the copy joins the first copy's stream at the peer (served-forwards.ts), so the output
 * keeps coming on the first stream only and even sampled output streams whole, with no splice
 * (client-streams.ts ends a sampled stream that moves to another stream of the same peer: a restart's).
 * B streams slower than A's estimate of its answer, and for longer than peer trust first allows it:
 * its output shows A it is at work (forward-acks.ts `streamed`), so A never gives it up as overdue.
 */
import { afterEach, expect, it } from "vitest";
import type { EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { streamCompletion } from "../api-client.js";
import { routedPair, TestSimEngine } from "./helpers.js";

/**
 * Test-only engine: the simulator's answer streamed word by word, `wordMs` apart — 0 until the test
 * sets it, so start-up calibration and warm-up run (and teach the node its costs) at full speed.
 */
class SlowStreamingEngine extends TestSimEngine {
  wordMs = 0;
  override async run(req: EngineRequest, onChunk?: (c: EngineChunk) => void, signal?: AbortSignal) {
    const r: EngineResult = await super.run(req, undefined, signal);
    for (const w of r.text.split(/(?= )/)) {
      onChunk?.({ text: w });
      await new Promise((resolve) => setTimeout(resolve, this.wordMs));
    }
    return r;
  }
}

const prefix = Array.from({ length: 300 }, (_, i) => `probe${i}`).join(" ");
let nodes: NodeHandle[] = [];
afterEach(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  nodes = [];
});

it.each(["channel", "http"])(
  "over the %s transport: a sampled answer streams whole while the origin probes its peer",
  async (forwardTransport) => {
    const slowB = new SlowStreamingEngine();
    const { a, model } = await routedPair(
      prefix,
      { A: new SlowStreamingEngine(), B: slowB },
      {
        // A asks B for the answer again (a probe) within a few ack waits while B streams it.
        extra: {
          forwardAckTimeoutMs: "1000",
          forwardTransport,
        },
        onStart: (na, nb) => {
          nodes = [na, nb];
        },
      },
    );
    slowB.wordMs = 200;
    const { text, error } = await streamCompletion(a.apiUrl, {
      model,
      prompt: `${prefix} sampled`,
      max_tokens: 12,
      temperature: 0.8,
    });
    const view = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as {
      stats: { probes: number; fallbacks: number };
    };
    expect(error).toBeUndefined();
    expect(text.split(" ")).toHaveLength(12);
    expect(view.stats.fallbacks).toBe(0);
    // The path under test was taken: B was asked again while its stream ran.
    expect(view.stats.probes).toBeGreaterThanOrEqual(1);
  },
);
