/** Posts a forward to a node as a peer would, for tests of the serving side of `/peer/forward`. */
import { expect } from "vitest";
import type { ChatMessage } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";

/** The final record's msg of a forward's stream. */
export type ForwardMsg = { type: string; error?: string; fault?: string };

/**
 * POSTs a forward (attempt `attempt`) in another model's tokens to `node` as member B: its response,
 * once its headers came.
 */
export function fetchForeignForward(
  node: NodeHandle,
  reqId: string,
  text: { prompt?: string; messages?: ChatMessage[] },
  signal: AbortSignal,
  attempt = 0,
): Promise<Response> {
  const b64 = Buffer.from(new Uint32Array(4).fill(7).buffer).toString("base64");
  const request = {
    id: reqId,
    tokens: b64,
    ...text,
    maxTokens: 2,
    model: node.nodeConfig.models[0],
    tokenizer: "other-model",
  };
  return fetch(`${node.peerUrl}/peer/forward`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-prefixmesh-sender": "B" },
    body: JSON.stringify({ reqId, attempt, hops: 1, request }),
    signal,
  });
}

/** The final record's msg of a forward's stream `res`. */
export async function finalMsg(res: Response): Promise<ForwardMsg> {
  expect(res.status).toBe(200);
  const lines = (await res.text()).trim().split("\n");
  return (JSON.parse(lines.at(-1) as string) as { msg: ForwardMsg }).msg;
}

/**
 * POSTs a forward in another model's tokens to `node` as member B and returns its final record's msg.
 * `timeoutMs` stays far below the stream's TTL: unbounded, a held step would hold the stream until then.
 */
export async function postForeignForward(
  node: NodeHandle,
  reqId: string,
  text: { prompt?: string; messages?: ChatMessage[] },
  timeoutMs: number,
): Promise<ForwardMsg> {
  return finalMsg(await fetchForeignForward(node, reqId, text, AbortSignal.timeout(timeoutMs)));
}

/** Member B's cancel of attempt `attempt` of its forward `reqId` to `node` (answered 204). */
export async function postCancel(
  node: NodeHandle,
  reqId: string,
  final: boolean,
  attempt = 0,
): Promise<void> {
  const res = await fetch(`${node.peerUrl}/peer/message`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-prefixmesh-sender": "B" },
    body: JSON.stringify({ type: "cancel", reqId, attempt, ...(final ? { final: true } : {}) }),
  });
  expect(res.status, await res.text()).toBe(204);
}
