/**
 * A sampled answer streaming from peer B when B restarts (a machine that rebooted: its old answer
 * stream to A stays open, half-open, and says no more): A sees B's new epoch and sends the forward
 * again, and B's new process answers it with no output at all. That answer is another run's: it must
 * not complete the old run's partial text as if it were the whole answer (client-streams.ts
 * `catchUp`): the client's stream ends with the mid-stream error.
 */
import { afterEach, expect, it } from "vitest";
import type { EngineChunk, EngineRequest } from "../../src/core/engine.js";
import type { PrefixNode } from "../../src/core/node/node.js";
import type { Effect } from "../../src/core/node/types.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { routedPair, TestSimEngine } from "./helpers.js";

/**
 * Test-only engine: a sampled request (temperature > 0) streams its first two words, then waits until
 * aborted; once the test says the node restarted, a sampled request answers "" with no output.
 * Everything else (warm-up, calibration) runs as the simulator's.
 */
class HeldThenEmptyEngine extends TestSimEngine {
  restarted = false;
  sampledRuns = 0;
  private heldNow: () => void = () => {};
  /** Resolves once a sampled run has streamed its words and waits. */
  readonly held = new Promise<void>((resolve) => {
    this.heldNow = resolve;
  });

  override async run(req: EngineRequest, onChunk?: (c: EngineChunk) => void, signal?: AbortSignal) {
    if ((req.temperature ?? 0) === 0) return super.run(req, onChunk, signal);
    this.sampledRuns++;
    const r = await super.run(req, undefined, signal);
    if (this.restarted) return { ...r, text: "", outputTokens: 0 };
    for (const w of r.text.split(/(?= )/).slice(0, 2)) onChunk?.({ text: w });
    this.heldNow();
    await new Promise((resolve) => signal?.addEventListener("abort", resolve));
    signal?.throwIfAborted();
    return r;
  }
}

/**
 * B restarts in place as seen from A: a new epoch, nothing left of the forwards it served, while the
 * old run's answer stream stays open and silent (its engine run waits on).
 */
function restartInPlace(b: NodeHandle): void {
  const rt = b.runtime as unknown as {
    node: PrefixNode;
    timers: { clear(): void };
    served: { open: Map<string, unknown> };
    applyAll(effects: Effect[]): void;
  };
  rt.served.open.clear();
  rt.timers.clear();
  rt.applyAll(rt.node.restart(Date.now()));
}

/** A streamed completion read as it comes: `firstText` resolves with the first text the client got. */
function streamAt(url: string, body: object) {
  let sawText: (t: string) => void = () => {};
  const firstText = new Promise<string>((resolve) => {
    sawText = resolve;
  });
  const done = (async () => {
    const res = await fetch(`${url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...body, stream: true }),
    });
    let text = "";
    let error: string | undefined;
    let buf = "";
    const decoder = new TextDecoder();
    for await (const bytes of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(bytes, { stream: true });
      const lines = buf.split("\n");
      buf = lines.pop() ?? "";
      for (const line of lines) {
        if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
        const ev = JSON.parse(line.slice(6)) as {
          choices?: { text?: string }[];
          error?: { message: string };
        };
        if (ev.error) error = ev.error.message;
        text += ev.choices?.[0]?.text ?? "";
        if (text.length > 0) sawText(text);
      }
    }
    return { text, error };
  })();
  return { firstText, done };
}

const prefix = Array.from({ length: 300 }, (_, i) => `restart${i}`).join(" ");
let nodes: NodeHandle[] = [];
afterEach(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  nodes = [];
});

/**
 * One try on a fresh pair. A busy machine may keep the path from being taken: A runs the request
 * itself from the start (then it answers whole: fine), or, once B restarted, runs it itself instead
 * of sending it to B again (a sampled stream cannot go on from another run: an error all the same).
 * True when the path was taken: B's new process answered the forward sent again.
 */
async function restartMidStream(forwardTransport: string): Promise<boolean> {
  const engineB = new HeldThenEmptyEngine();
  const { a, b, model } = await routedPair(
    prefix,
    { B: engineB },
    {
      // The full mesh sends a forward again to a peer seen in a new epoch.
      extra: { gossip: "full", forwardTransport },
      onStart: (na, nb) => {
        nodes.push(na, nb);
      },
    },
  );
  const { firstText, done } = streamAt(a.apiUrl, {
    model,
    prompt: `${prefix} sampled`,
    max_tokens: 12,
    temperature: 0.8,
  });
  if ((await Promise.race([engineB.held.then(() => "held"), done.then(() => "done")])) === "done") {
    expect((await done).error).toBeUndefined();
    return false;
  }
  const partial = await firstText;
  engineB.restarted = true;
  restartInPlace(b);
  const { text, error } = await done;
  expect(error).toMatch(/mid-stream/);
  expect(text.startsWith(partial)).toBe(true);
  return engineB.sampledRuns === 2;
}

it.each(["channel", "http"])(
  "over the %s transport: a restarted peer's empty answer ends a sampled stream with an error",
  async (forwardTransport) => {
    let tries = 1;
    while (!(await restartMidStream(forwardTransport))) {
      if (++tries > 4) throw new Error("in 4 fresh pairs the forward never went to B's new process");
      await Promise.all(nodes.map((n) => n.stop()));
      nodes = [];
    }
  },
  120_000,
);
