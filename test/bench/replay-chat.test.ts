/** `prefixmesh bench` replaying a chat workload: a follow-up is sent only after its turn is answered. */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { replay } from "../../src/bench/replay.js";
import { parseTurns } from "../../src/workload/chat-turns.js";
import { commonWords } from "../../src/workload/common-words.js";
import { syntheticChat } from "../../src/workload/synthetic.js";

/** Prompt text: one common word per token id (what bench sends). */
const WORDS = commonWords();

/** A test double of a node's completions endpoint: answers after a short, prompt-dependent delay. */
function fakeNode() {
  const arrived = new Map<string, number>();
  const answered = new Map<string, number>();
  let seq = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      const { prompt } = JSON.parse(body) as { prompt: string };
      arrived.set(prompt, ++seq);
      // Uneven service times, so a later request often finishes first.
      setTimeout(
        () => {
          answered.set(prompt, ++seq);
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ choices: [{ text: "A" }], usage: { prompt_tokens: 1 } }));
        },
        (prompt.length % 4) * 8,
      );
    });
  });
  return { server, arrived, answered };
}

describe("bench replay of a chat workload", () => {
  it("never sends a turn before the turn it follows has been answered (4 concurrent clients)", async () => {
    const w = syntheticChat({
      seed: 3,
      scale: 0.2,
      conversations: 40,
      turns: parseTurns("2-6"),
      active: 3,
      text: WORDS,
    });
    const prompts = w.requests.map((r) => r.prompt!);
    expect(new Set(prompts).size).toBe(prompts.length);
    // Follow-ups close behind their predecessor: without the wait, 4 clients would overtake them.
    const close = w.requests.filter((r, i) => r.after && r.after.request >= i - 3).length;
    expect(close).toBeGreaterThan(10);

    const node = fakeNode();
    await new Promise<void>((ok) => node.server.listen(0, "127.0.0.1", ok));
    try {
      const { port } = node.server.address() as AddressInfo;
      const samples = await replay(w, "test", { urls: [`http://127.0.0.1:${port}`], concurrency: 4 });
      expect(samples.every((s) => s.ok)).toBe(true);
      w.requests.forEach((r) => {
        if (!r.after) return;
        const prev = w.requests[r.after.request]!.prompt!;
        expect(node.arrived.get(r.prompt!)!, r.id).toBeGreaterThan(node.answered.get(prev)!);
      });
    } finally {
      await new Promise<void>((ok) => node.server.close(() => ok()));
    }
  });
});
