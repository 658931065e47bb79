/**
 * Each forward the sender sends streams its answer under a name of its own: a copy sent again to a
 * restarted peer (the full mesh re-sends on a new epoch) streams the new process's run from the start,
 * and the client's splice (client-streams.ts) must tell it from the first copy's output.
 */
import { expect, it } from "vitest";
import type { PeerClient } from "../../src/net/transport-client.js";
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
