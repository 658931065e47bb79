/**
 * A member whose TLS handshake fails on a certificate (a CA made again on one machine, a certificate
 * expired while running) is up, yet SWIM sees it only go silent and dead: the senders say why at warn,
 * once a minute per peer across snapshots and mesh messages, and the rest at debug.
 */
import { expect, it } from "vitest";
import type { PeerClient } from "../../src/net/transport-client.js";
import { classify } from "../../src/net/transport-error.js";
import type { NodeMetrics } from "../../src/server/metrics.js";
import { CERT_REFUSAL_SAY_EVERY_MS, certRefusalsOf } from "../../src/server/runtime/cert-refusals.js";
import { PeerSender } from "../../src/server/runtime/peer-sender.js";
import { StrangerPools } from "../../src/server/runtime/stranger-pools.js";
import { waitFor } from "../e2e/helpers.js";
import { snapshotMsg } from "../net/fixtures.js";

const certErr = () =>
  classify(
    Object.assign(new Error("self-signed certificate in certificate chain"), {
      code: "SELF_SIGNED_CERT_IN_CHAIN",
    }),
  );

function harness() {
  let now = 0;
  const lines: { level: string; msg: string; f: Record<string, unknown> }[] = [];
  const log = (level: string) => (f: Record<string, unknown>, msg: string) =>
    void lines.push({ level, msg, f });
  const logger = { info: log("info"), warn: log("warn"), error: log("error"), debug: log("debug") };
  let failures = 0;
  const delivered: string[] = [];
  const client = { send: () => Promise.reject(certErr()), has: () => true } as unknown as PeerClient;
  const sender = new PeerSender({
    client,
    metrics: {
      peerFailures: { inc: () => void failures++ },
      pushBack: { inc: () => {} },
      gossipBytes: { inc: () => {} },
    } as unknown as NodeMetrics,
    logger,
    deliver: (i) => void delivered.push(i.type),
    relay: () => {},
    now: () => now,
  });
  const pools = new StrangerPools({
    client,
    url: (id) => `https://127.0.0.1:1/${id}`,
    isMember: () => true,
    isVerifying: () => false,
    isSending: () => false,
    now: () => now,
  });
  const snapshot = async (to = "B") => {
    const before = failures;
    sender.snapshot(to, snapshotMsg([1]));
    await waitFor(() => failures > before, 5_000, "the failure");
  };
  const warned = () =>
    lines.filter((l) => l.level === "warn" && /TLS handshake failed on a certificate/.test(l.msg));
  return {
    client,
    sender,
    pools,
    logger,
    snapshot,
    warned,
    delivered,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

it("says a member's certificate failures at warn, once a minute per peer, across both senders", async () => {
  const h = harness();
  try {
    for (let i = 0; i < 4; i++) await h.snapshot();
    expect(h.warned()).toHaveLength(1);
    expect(h.warned()[0]?.f).toMatchObject({ peer: "B", sending: "snapshot" });
    expect(String(h.warned()[0]?.f.err)).toMatch(/not from this node's cluster CA/);
    // Still a failed send for the node (SWIM judges the member).
    expect(h.delivered.filter((t) => t === "send-failed")).toHaveLength(4);
    // A mesh message to the same member within the minute is not said again.
    h.pools.sendFailed(h.logger, "B", certErr());
    expect(h.warned()).toHaveLength(1);
    h.pools.sendFailed(h.logger, "C", certErr());
    // Said once its address's certificate is read (none answers there: the CA's words stand).
    await waitFor(() => h.warned().length >= 2, 5_000, "C said");
    expect(h.warned()).toHaveLength(2);
    expect(h.warned()[1]?.f).toMatchObject({ peer: "C", sending: "mesh" });
    h.advance(CERT_REFUSAL_SAY_EVERY_MS);
    await h.snapshot();
    expect(h.warned()).toHaveLength(3);
  } finally {
    h.pools.stop();
  }
});

it("keeps no entry past its minute: departed peers' ids do not pile up", async () => {
  const h = harness();
  try {
    for (let i = 0; i < 20; i++) await h.snapshot(`gone-${i}`);
    expect(h.warned()).toHaveLength(20);
    expect(certRefusalsOf(h.client).size).toBe(20);
    h.advance(CERT_REFUSAL_SAY_EVERY_MS);
    await h.snapshot("Z");
    expect(certRefusalsOf(h.client).size).toBe(1);
  } finally {
    h.pools.stop();
  }
});

it("keeps the node's clock whichever sender meets a certificate failure first", async () => {
  const h = harness();
  try {
    // The mesh sender first: the one-per-node record must not fall back to another clock.
    h.pools.sendFailed(h.logger, "B", certErr());
    await waitFor(() => h.warned().length >= 1, 5_000, "B said");
    h.advance(CERT_REFUSAL_SAY_EVERY_MS);
    await h.snapshot();
    expect(h.warned()).toHaveLength(2);
  } finally {
    h.pools.stop();
  }
});
