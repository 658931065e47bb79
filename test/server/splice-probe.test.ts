/**
 * A streamed answer whose origin probes its live serving peer meanwhile (answer recovery re-sends the
 * forward): the copy joins the first copy's stream at the peer (served-forwards.ts), so the output
 * keeps coming on the first stream only and even sampled output streams whole, with no splice
 * (client-streams.ts ends a sampled stream that moves to another stream of the same peer: a restart's).
 */
import { afterEach, expect, it } from "vitest";
import type { EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { streamCompletion } from "../api-client.js";
import { routedPair, TestSimEngine } from "./helpers.js";

/** Test-only engine: the simulator's answer streamed word by word, `wordMs` apart. */
class SlowStreamingEngine extends TestSimEngine {
  constructor(private readonly wordMs: number) {
    super();
  }
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
    const { a, model } = await routedPair(
      prefix,
      { A: new SlowStreamingEngine(0), B: new SlowStreamingEngine(60) },
      {
        // Short ack waits: A asks B for the answer again every few tens of ms while B streams it.
        extra: {
          forwardAckTimeoutMs: "40",
          answerSlackMs: "20000",
          maxTimedOutAttempts: "0",
          forwardTransport,
        },
        onStart: (na, nb) => {
          nodes = [na, nb];
        },
      },
    );
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
