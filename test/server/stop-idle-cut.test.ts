/**
 * What the start of a stop does to API connections Node counts as idle. Node's `server.close()` (which
 * fastify's `close()` calls as the stop begins) cuts every connection whose last request has fully
 * arrived and whose answer is ended — ended, not written out: a slow reader's large answer, and a
 * request pipelined behind it, would be lost there. Only owed-answers.ts may cut, and only what
 * owes nothing. A request sent on a kept-alive connection as the stop begins is answered too: nothing
 * is cut before the drain ends.
 */
import { describe, expect, it } from "vitest";
import type { EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import { waitFor } from "../e2e/helpers.js";
import { nodesStoppedAfterEach, soloNode, TestSimEngine } from "./helpers.js";
import { rawConnection } from "./raw-connection.js";

/** Far more than loopback's socket buffers hold: the answer stays partly unwritten until read. */
const ANSWER_CHARS = 24 * 1024 * 1024;

/**
 * Test double: the simulated engine, each run held until released (the huge one, or the others in
 * order); a request for 5 tokens gets a huge answer.
 */
class HeldEngineDouble extends TestSimEngine {
  started = 0;
  private readonly gates: { huge: boolean; go: () => void }[] = [];
  release(huge = false): void {
    const i = this.gates.findIndex((g) => g.huge === huge);
    if (i >= 0) this.gates.splice(i, 1)[0]?.go();
  }
  override async run(req: EngineRequest, onChunk?: (c: EngineChunk) => void): Promise<EngineResult> {
    this.started++;
    const huge = req.maxTokens === 5;
    await new Promise<void>((go) => this.gates.push({ huge, go }));
    const result = await super.run(req, onChunk);
    return huge ? { ...result, text: "x".repeat(ANSWER_CHARS) } : result;
  }
}

const completion = (model: string, prompt: string, huge = false) => {
  const body = JSON.stringify({ model, prompt, max_tokens: huge ? 5 : 4 });
  return (
    "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  );
};

/** The HTTP responses in `bytes`, each as its status line and its body's length as received. */
function responses(bytes: Buffer): { status: string; length: number; received: number }[] {
  const out = [];
  let text = bytes.toString("latin1");
  while (text.length > 0) {
    const end = text.indexOf("\r\n\r\n");
    if (end < 0) break;
    const head = text.slice(0, end);
    const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
    const received = Math.min(length, text.length - end - 4);
    out.push({ status: head.slice(0, head.indexOf("\r\n")), length, received });
    text = text.slice(end + 4 + received);
  }
  return out;
}

const keep = nodesStoppedAfterEach();

describe("the start of a stop", () => {
  it("keeps an ended answer still being written, and the request pipelined behind it", async () => {
    const engine = new HeldEngineDouble();
    const { node, model } = await soloNode(engine, { drainSec: 10 });
    keep(node);
    const client = await rawConnection(node.apiUrl);
    // Both requests in one write: the second is read (and queued) while the first is answered.
    client.socket.write(
      completion(model, "Tell me a huge story", true) + completion(model, "And a short one"),
    );
    await waitFor(() => engine.started === 1, 15_000, "the first run to start");
    engine.release(true);
    const chunks: Buffer[] = [];
    const gotFirstBytes = new Promise((r) => client.socket.once("data", r));
    client.socket.on("data", (c: Buffer) => chunks.push(c));
    // The first bytes out mean the whole answer is ended; the rest waits in the socket's buffer.
    await gotFirstBytes;
    client.socket.pause();
    const stopped = node.stop();
    // Past the stop's start (its close of the port), with the second run still held: unfixed, the
    // connection is cut here (the paused client learns it only as it reads).
    await waitFor(async () => !(await fetch(node.apiUrl).catch(() => null)), 15_000, "the port to close");
    await waitFor(() => engine.started === 2, 15_000, "the pipelined run to start");
    engine.release();
    client.socket.resume();
    await waitFor(() => client.closed(), 30_000, "the answers' connection to close");
    await stopped;
    const [first, second] = responses(Buffer.concat(chunks));
    expect(first?.status).toMatch(/^HTTP\/1\.1 200/);
    expect(first?.length).toBeGreaterThan(ANSWER_CHARS);
    expect(first?.received).toBe(first?.length);
    expect(second?.status).toMatch(/^HTTP\/1\.1 200/);
    expect(second?.received).toBe(second?.length);
  }, 60_000);

  it("answers a request sent on a kept-alive connection as the stop begins", async () => {
    const engine = new HeldEngineDouble();
    const { node, model } = await soloNode(engine, { drainSec: 10 });
    keep(node);
    // A run held in flight keeps the drain, and so the port's close, going.
    const held = await rawConnection(node.apiUrl);
    held.socket.write(completion(model, "Tell me a story"));
    await waitFor(() => engine.started === 1, 15_000, "the held run to start");
    const keptAlive = await rawConnection(node.apiUrl);
    const chunks: Buffer[] = [];
    keptAlive.socket.on("data", (c: Buffer) => chunks.push(c));
    keptAlive.socket.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    await waitFor(() => responses(Buffer.concat(chunks)).length === 1, 15_000, "the first answer");
    keptAlive.socket.write("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    const stopped = node.stop();
    const answered = () => responses(Buffer.concat(chunks)).length === 2;
    await waitFor(() => answered() || keptAlive.closed(), 15_000, "an answer or a cut");
    engine.release();
    await stopped;
    const second = responses(Buffer.concat(chunks))[1];
    expect(second?.status).toMatch(/^HTTP\/1\.1 \d{3}/);
    expect(second?.received).toBe(second?.length);
  }, 60_000);
});
