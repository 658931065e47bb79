/**
 * Stopping a node whose last answer is written but not yet read: a large answer to a client that is
 * slow to read it. The answer is owed until it is out, so the stop's cut of the connections that owe
 * nothing (here, one that never sent a byte) must leave it whole; the client, reading only after
 * that cut, gets every byte.
 */
import { describe, expect, it } from "vitest";
import type { EngineChunk, EngineRequest, EngineResult } from "../../src/core/engine.js";
import { waitFor } from "../e2e/helpers.js";
import { nodesStoppedAfterEach, soloNode, TestSimEngine } from "./helpers.js";
import { rawConnection } from "./raw-connection.js";

/** Far more than loopback's socket buffers hold: the answer stays partly unwritten until read. */
const ANSWER_CHARS = 24 * 1024 * 1024;

/** Test double: the simulated engine, its run held until released, then answering a huge text. */
class HugeAnswerDouble extends TestSimEngine {
  started = 0;
  private go: () => void = () => {};
  release(): void {
    this.go();
  }
  override async run(req: EngineRequest, onChunk?: (c: EngineChunk) => void): Promise<EngineResult> {
    this.started++;
    await new Promise<void>((go) => {
      this.go = go;
    });
    return { ...(await super.run(req, onChunk)), text: "x".repeat(ANSWER_CHARS) };
  }
}

const keep = nodesStoppedAfterEach();

describe("stopping a node while a large answer is still being read", () => {
  it("cuts the silent connection but leaves the answer whole", async () => {
    const engine = new HugeAnswerDouble();
    const { node, model } = await soloNode(engine, { drainSec: 10 });
    keep(node);
    const client = await rawConnection(node.apiUrl);
    client.socket.pause();
    const body = JSON.stringify({ model, prompt: "Tell me a story about the sea", max_tokens: 4 });
    client.socket.write(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n" +
        `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    await waitFor(() => engine.started === 1, 15_000, "the run to start");
    const mute = await rawConnection(node.apiUrl);
    const stopped = node.stop();
    engine.release();
    // The cut of the connections owing nothing comes after the drain, with the answer written.
    await waitFor(() => mute.closed(), 15_000, "the silent connection to be cut");
    const chunks: Buffer[] = [];
    client.socket.on("data", (c: Buffer) => chunks.push(c));
    client.socket.resume();
    await waitFor(() => client.closed(), 30_000, "the answer's connection to close");
    await stopped;
    const text = Buffer.concat(chunks).toString("latin1");
    const head = text.slice(0, text.indexOf("\r\n\r\n"));
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    const length = Number(/content-length: (\d+)/i.exec(head)?.[1]);
    expect(length).toBeGreaterThan(ANSWER_CHARS);
    expect(text.length - head.length - 4).toBe(length);
  }, 60_000);
});
