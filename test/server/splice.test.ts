import { afterEach, describe, expect, it } from "vitest";
import type { EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { postCompletion, streamCompletion } from "../api-client.js";
import { routedPair, TestSimEngine } from "./helpers.js";

/**
 * Test-only engine: the simulator's engine with its answer streamed word by word (`wordMs` apart, 5),
 * that can crash after `failAfter` words or answer other words from the third on (`variant`).
 */
class FakeStreamingEngine extends TestSimEngine {
  constructor(private readonly behaviour: { failAfter?: number; variant?: string; wordMs?: number } = {}) {
    super();
  }
  override async run(req: EngineRequest, onChunk?: (c: EngineChunk) => void, signal?: AbortSignal) {
    const r: EngineResult = await super.run(req, undefined, signal);
    const words = r.text.split(/(?= )/);
    let text = "";
    for (const [i, w] of words.entries()) {
      if (i === this.behaviour.failAfter) throw new Error("engine crashed mid-answer (test engine)");
      const out = this.behaviour.variant && i >= 2 ? ` ${this.behaviour.variant}` : w;
      text += out;
      onChunk?.({ text: out });
      await new Promise((resolve) => setTimeout(resolve, this.behaviour.wordMs ?? 5));
    }
    return { ...r, text };
  }
}

const prefix = Array.from({ length: 300 }, (_, i) => `splice${i}`).join(" ");
let nodes: NodeHandle[] = [];
afterEach(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  nodes = [];
});

/** A and B; B has served the prefix and A's estimate shows it, so A forwards prompts with it to B. */
function forwardingPair(b: FakeStreamingEngine, a: FakeStreamingEngine, extra = {}) {
  return routedPair(
    prefix,
    { A: a, B: b },
    {
      extra,
      onStart: (na, nb) => {
        nodes = [na, nb];
      },
    },
  );
}

describe("a streamed answer whose serving peer fails after partial output", () => {
  it("continues from the fallback under greedy decoding: every word once, no error", async () => {
    const { a, model } = await forwardingPair(
      new FakeStreamingEngine({ failAfter: 3 }),
      new FakeStreamingEngine(),
    );
    const req = { model, prompt: `${prefix} a long answer`, max_tokens: 12 };
    const { text, error } = await streamCompletion(a.apiUrl, req);
    expect(error).toBeUndefined();
    // What A's (healthy) engine answers on its own: the same model, the same greedy text.
    const alone = (await (await postCompletion(a.apiUrl, req)).json()) as { choices: { text: string }[] };
    expect(text).toBe(alone.choices[0]?.text);
    expect(text.split(" ")).toHaveLength(12);
    const view = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as { stats: { fallbacks: number } };
    expect(view.stats.fallbacks).toBeGreaterThanOrEqual(1);
  });

  it("ends the stream with an error when the fallback's text disagrees with what was sent", async () => {
    const { a, model } = await forwardingPair(
      new FakeStreamingEngine({ failAfter: 4 }),
      new FakeStreamingEngine({ variant: "other" }),
    );
    const { text, error } = await streamCompletion(a.apiUrl, {
      model,
      prompt: `${prefix} another`,
      max_tokens: 12,
    });
    expect(error).toMatch(/failed mid-stream/);
    expect(text.split(" ")).toHaveLength(4); // B's four words, nothing spliced on
  });

  it("never splices sampled output: a fallback after partial output is an error", async () => {
    const { a, model } = await forwardingPair(
      new FakeStreamingEngine({ failAfter: 3 }),
      new FakeStreamingEngine(),
    );
    const { error } = await streamCompletion(a.apiUrl, {
      model,
      prompt: `${prefix} sampled`,
      max_tokens: 12,
      temperature: 0.8,
    });
    expect(error).toMatch(/failed mid-stream/);
  });

  it("answers a sampled non-streaming request whole after such a fallback", async () => {
    // Nothing partial reached this client, so there is no stream to break: the fallback's answer is it.
    const { a, model } = await forwardingPair(
      new FakeStreamingEngine({ failAfter: 3 }),
      new FakeStreamingEngine(),
    );
    const res = await postCompletion(a.apiUrl, {
      model,
      prompt: `${prefix} whole`,
      max_tokens: 12,
      temperature: 0.8,
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { text: string }[]; prefixmesh: { served_by: string } };
    expect(body.prefixmesh.served_by).toBe("A");
    expect(body.choices[0]?.text.split(" ")).toHaveLength(12);
    const view = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as { stats: { fallbacks: number } };
    expect(view.stats.fallbacks).toBe(1); // B did stream three words before it failed
  });

  it("keeps a slow peer's late output out of the stream once the node has fallen back", async () => {
    // B streams slowly (a word per 40 ms) and past A's 150 ms forward timeout; A falls back and
    // answers itself. B's later words belong to an abandoned attempt and must not reach the client.
    const { a, model } = await forwardingPair(
      new FakeStreamingEngine({ wordMs: 40 }),
      new FakeStreamingEngine(),
      { forwardTimeoutMs: "150" },
    );
    const req = { model, prompt: `${prefix} slow peer`, max_tokens: 12 };
    const { text, error } = await streamCompletion(a.apiUrl, req);
    expect(error).toBeUndefined();
    // A really did fall back (read before the request below, which may fall back again).
    const view = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as { stats: { fallbacks: number } };
    expect(view.stats.fallbacks).toBeGreaterThanOrEqual(1);
    const alone = (await (await postCompletion(a.apiUrl, req)).json()) as { choices: { text: string }[] };
    expect(text).toBe(alone.choices[0]?.text);
    await new Promise((r) => setTimeout(r, 400)); // B's stream runs out meanwhile: nothing breaks
    const after = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as { inFlightClients: number };
    expect(after.inFlightClients).toBe(0);
  });
});
