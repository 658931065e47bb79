/**
 * Each forward the sender sends streams its answer under a name of its own: a copy sent again to a
 * restarted peer (the full mesh re-sends on a new epoch) streams the new process's run from the start,
 * and the client's splice (client-streams.ts) must tell it from the first copy's output.
 */
import { expect, it } from "vitest";
import type { PeerClient } from "../../src/net/transport-client.js";
import type { ReplyMsg } from "../../src/net/transport-wire.js";
import type { NodeMetrics } from "../../src/server/metrics.js";
import { PeerSender } from "../../src/server/runtime/peer-sender.js";
import { fwd } from "../net/fixtures.js";

it("names each forward's answer stream apart, copies of one forward to one peer included", () => {
  const relayed: { source: string; text: string; stream: string }[] = [];
  // A test double of the transport: each forward streams one chunk and never ends.
  const client = {
    forward: (_to: string, _msg: unknown, onChunk: (text: string) => void) => {
      onChunk("one");
      return new Promise(() => {});
    },
  } as unknown as PeerClient;
  const s = new PeerSender({
    client,
    metrics: {} as NodeMetrics,
    logger: { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} },
    deliver: () => {},
    relay: (_request, source, text, stream) => void relayed.push({ source, text, stream }),
  });
  const msg = fwd("A-1");
  s.forward("B", msg);
  s.forward("B", msg);
  s.forward("C", msg);
  expect(relayed.map((r) => r.source)).toEqual(["B", "B", "C"]);
  expect(new Set(relayed.map((r) => r.stream)).size).toBe(3);
});

it("delivers a forward's answer with the request and the stream it came on", async () => {
  const reply = { type: "result", reqId: "A-1", attempt: 1 } as unknown as ReplyMsg;
  const relayed: string[] = [];
  const delivered: { type: string; stream: string | undefined; same: boolean }[] = [];
  // A test double of the transport: each forward streams one chunk, then its answer.
  const client = {
    forward: (_to: string, _msg: unknown, onChunk: (text: string) => void) => {
      onChunk("one");
      return Promise.resolve(reply);
    },
  } as unknown as PeerClient;
  const msg = fwd("A-1");
  const s = new PeerSender({
    client,
    metrics: {} as NodeMetrics,
    logger: { info: () => {}, warn: () => {}, error: () => {}, debug: () => {} },
    deliver: (input, on) =>
      void delivered.push({ type: input.type, stream: on?.stream, same: on?.request === msg.request }),
    relay: (_request, _source, _text, stream) => void relayed.push(stream),
  });
  s.forward("B", msg);
  s.forward("B", msg);
  await new Promise((r) => setImmediate(r));
  expect(delivered).toEqual(relayed.map((stream) => ({ type: "peer-message", stream, same: true })));
  expect(new Set(relayed).size).toBe(2);
});
