/**
 * `CONNECT` on the client and peer ports: Node drops such a connection unanswered unless a listener
 * answers it, so a client could not tell a refusal from a crash. Both ports answer 405 with a JSON
 * error and close.
 */
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { soloNode } from "./helpers.js";

/** What the server sends on a fresh connection after `request`, until it closes (≤ 10 s). */
async function exchange(base: string, request: string): Promise<string> {
  const url = new URL(base);
  const socket = connect(Number(url.port), url.hostname);
  const parts: Buffer[] = [];
  socket.on("data", (c: Buffer) => parts.push(c));
  socket.on("error", () => {});
  socket.write(request);
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the connection was not closed")), 10_000);
    socket.on("close", () => {
      clearTimeout(timer);
      resolve();
    });
  });
  return Buffer.concat(parts).toString();
}

describe("CONNECT on a port that is no proxy", () => {
  let node: NodeHandle;
  beforeAll(async () => {
    ({ node } = await soloNode());
  });
  afterAll(async () => {
    await node?.stop();
  });

  it("is answered 405 with a JSON error on the client port and the peer port", async () => {
    const request = "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n";
    for (const [base, message] of [
      [node.apiUrl, (b: { error: { message: string } }) => b.error.message],
      [node.peerUrl, (b: { error: string }) => b.error],
    ] as const) {
      const answer = await exchange(base, request);
      expect(answer).toMatch(/^HTTP\/1\.1 405 /);
      const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4));
      expect(message(body)).toMatch(/CONNECT is not allowed/);
    }
    // The port still serves.
    expect((await fetch(`${node.apiUrl}/health`)).status).toBe(200);
  });
});
