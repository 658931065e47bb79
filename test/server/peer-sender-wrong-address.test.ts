/**
 * A peer whose address answers as no peer port (a member's API port) refuses every snapshot: the
 * sender says so at warn once a minute per peer, not at each snapshot; other refusals as before.
 */

import { expect, it } from "vitest";
import type { PeerClient } from "../../src/net/transport-client.js";
import { TransportError } from "../../src/net/transport-error.js";
import type { NodeMetrics } from "../../src/server/metrics.js";
import { PeerSender } from "../../src/server/runtime/peer-sender.js";
import type { SaidPerKey } from "../../src/server/runtime/said-per-key.js";
import { waitFor } from "../e2e/helpers.js";
import { snapshotMsg } from "../net/fixtures.js";

function sender(err: () => Error) {
  let now = 0;
  const lines: { level: string; msg: string }[] = [];
  const log = (level: string) => (_f: unknown, msg: string) => void lines.push({ level, msg });
  let failures = 0;
  const s = new PeerSender({
    client: { send: () => Promise.reject(err()) } as unknown as PeerClient,
    metrics: {
      peerFailures: { inc: () => void failures++ },
      pushBack: { inc: () => {} },
      gossipBytes: { inc: () => {} },
    } as unknown as NodeMetrics,
    logger: { info: log("info"), warn: log("warn"), error: log("error"), debug: log("debug") },
    deliver: () => {},
    relay: () => {},
    now: () => now,
  });
  /** Sends one snapshot to `to` and waits for its refusal to be counted. */
  const refuse = async (to = "B") => {
    const before = failures;
    s.snapshot(to, snapshotMsg([1]));
    await waitFor(() => failures > before, 5_000, "the refusal");
  };
  const warned = () => lines.filter((l) => l.level === "warn" && l.msg === "peer refused message").length;
  const advance = (ms: number): void => {
    now += ms;
  };
  return { s, refuse, warned, advance };
}

const apiPort = () =>
  new TransportError(
    "http",
    "peer B: the address answers as … API port",
    404,
    true,
    undefined,
    undefined,
    true,
  );

it("says a peer's refusals as no peer port once a minute, per peer", async () => {
  const f = sender(apiPort);
  for (let i = 0; i < 5; i++) await f.refuse();
  expect(f.warned()).toBe(1);
  await f.refuse("C");
  expect(f.warned()).toBe(2);
  f.advance(60_000);
  await f.refuse();
  expect(f.warned()).toBe(3);
  // A peer forgotten (it left) starts over.
  f.s.forget("C");
  await f.refuse("C");
  expect(f.warned()).toBe(4);
});

it("keeps no rate-limit entry past its minute (ids of departed peers do not pile up)", async () => {
  const f = sender(apiPort);
  const held = () => (f.s as unknown as { wrongAddressSaid: SaidPerKey }).wrongAddressSaid.size;
  // Members of a gossip mesh that leave are never forget()-ten by the sender.
  for (let i = 0; i < 20; i++) await f.refuse(`gone-${i}`);
  expect(f.warned()).toBe(20);
  expect(held()).toBe(20);
  f.advance(60_000);
  await f.refuse("Z");
  expect(f.warned()).toBe(21);
  expect(held()).toBe(1);
});

it("says every other refusal, as before", async () => {
  const f = sender(() => new TransportError("http", "peer B answered 500", 500));
  for (let i = 0; i < 3; i++) await f.refuse();
  expect(f.warned()).toBe(3);
});
