/**
 * Stopping a node while clients hold connections on its API port that owe them no answer: one kept
 * alive after its answer, one that never sent a byte, one that sent half a request's headers (a slow
 * loris). The stop cuts them at once instead of waiting out the answer grace, while a request in flight
 * still gets its whole answer: its 200 when it finishes within the drain, or, streamed and held past
 * it, its in-band error.
 */
import { describe, expect, it } from "vitest";
import type { EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import { ANSWER_GRACE_MS } from "../../src/server/runtime/close-grace.js";
import { waitFor } from "../e2e/helpers.js";
import { nodesStoppedAfterEach, soloNode, TestSimEngine } from "./helpers.js";
import { rawConnection } from "./raw-connection.js";

/**
 * Test double: the simulated engine, each run held until the test lets it go (or never), after one
 * streamed word: a streaming client's answer has begun.
 */
class GatedEngineDouble extends TestSimEngine {
  started = 0;
  private readonly gates: (() => void)[] = [];
  release(): void {
    this.gates.shift()?.();
  }
  override async run(req: EngineRequest, onChunk?: (c: EngineChunk) => void): Promise<EngineResult> {
    this.started++;
    onChunk?.({ text: "Once" });
    await new Promise<void>((go) => this.gates.push(go));
    return super.run(req, onChunk);
  }
}

/** Opens the three kinds of connection that owe no answer; resolves once each is in place. */
async function silentConnections(url: string) {
  const keptAlive = await rawConnection(url);
  keptAlive.socket.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  await new Promise((r) => keptAlive.socket.once("data", r));
  const mute = await rawConnection(url);
  const loris = await rawConnection(url);
  loris.socket.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  return [keptAlive, mute, loris];
}

const keep = nodesStoppedAfterEach();

describe("stopping a node with connections that owe no answer", () => {
  it.each([
    ["its 200, finished within the drain", 10, false],
    ["its streamed error, held past the drain", 1, true],
  ] as const)(
    "cuts them at once; the request in flight gets %s",
    async (_what, drainSec, stream) => {
      const engine = new GatedEngineDouble();
      const { node, model } = await soloNode(engine, { drainSec });
      keep(node);
      let answeredAt = 0;
      let answerHead: string | null | undefined;
      const answer = fetch(`${node.apiUrl}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, prompt: "Tell me a story about the sea", max_tokens: 4, stream }),
      }).then(async (res) => {
        answerHead = res.headers.get("connection");
        const body = await res.text();
        answeredAt = performance.now();
        return { status: res.status, body };
      });
      await waitFor(() => engine.started === 1, 15_000, "the run to start");
      // The streamed answer's head is out, kept alive: only its end can free the connection.
      if (stream) await waitFor(() => answerHead !== undefined, 15_000, "the stream's head");
      const silent = await silentConnections(node.apiUrl);

      const stopped = node.stop().then(() => performance.now());
      if (!stream) engine.release();
      const a = await answer;
      expect(a.status).toBe(200);
      if (stream) {
        expect(answerHead).not.toBe("close");
        expect(a.body).toMatch(/Once[\s\S]*"error".*node shut down before answering/);
      } else {
        expect(JSON.parse(a.body).choices).toHaveLength(1);
      }
      // Unfixed, the stop waits out the grace after the last answer for these connections to go.
      expect((await stopped) - answeredAt).toBeLessThan(ANSWER_GRACE_MS - 100);
      await waitFor(() => silent.every((c) => c.closed()), 10_000, "the server to close all three");
    },
    60_000,
  );
});
