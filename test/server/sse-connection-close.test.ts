/**
 * A streamed answer honours the client's `Connection: close` (RFC 9112 §9.6): the node closes the
 * connection after `[DONE]`. A client that reads to the end of the connection (HTTP/1.0 style, or a
 * request on a connection it will not reuse) otherwise waited out the keep-alive timeout.
 */

import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { soloNode } from "./helpers.js";

describe("SSE and Connection: close", () => {
  let node: NodeHandle;
  let model: string;
  beforeAll(async () => {
    ({ node, model } = await soloNode());
  });
  afterAll(async () => {
    await node?.stop();
  });

  it("closes the connection after a streamed answer when the client asked it to", async () => {
    const body = JSON.stringify({ model, prompt: "hello world", max_tokens: 2, stream: true });
    const request = [
      "POST /v1/completions HTTP/1.1",
      "Host: 127.0.0.1",
      "Connection: close",
      "Content-Type: application/json",
      `Content-Length: ${Buffer.byteLength(body)}`,
      "",
      body,
    ].join("\r\n");
    const url = new URL(node.apiUrl);
    const socket = connect(Number(url.port), url.hostname);
    const parts: Buffer[] = [];
    socket.on("data", (c: Buffer) => parts.push(c));
    socket.write(request);
    // Everything the node sends, up to its closing the connection (or the deadline).
    const closed = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 10_000);
      socket.on("close", () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    socket.destroy();
    const answer = Buffer.concat(parts).toString();
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toContain("data: [DONE]");
    expect(answer.toLowerCase()).toContain("\r\nconnection: close\r\n");
    expect(closed).toBe(true);
  });
});
