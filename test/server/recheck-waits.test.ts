/** A refused static peer or seed waits minutes for its re-check: stopping the node ends that wait. */
import { describe, expect, it } from "vitest";
import type { RecheckTiming } from "../../src/core/refusals.js";
import type { PeerClient } from "../../src/net/transport-client.js";
import { TransportError } from "../../src/net/transport-error.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import type { RuntimeLogger } from "../../src/server/runtime/logger.js";
import type { MeshPeers } from "../../src/server/runtime/mesh-peers.js";
import { resolveSeeds } from "../../src/server/runtime/mesh-seeds.js";
import type { NodeRuntime } from "../../src/server/runtime/node-runtime.js";
import { UNAUTHENTICATED_TRIES } from "../../src/server/runtime/peer-refusal.js";
import { RecheckWaits } from "../../src/server/runtime/recheck-waits.js";
import { StaticPeerChecks } from "../../src/server/runtime/static-peer-checks.js";

const quiet: RuntimeLogger = { info: () => {}, debug: () => {}, warn: () => {}, error: () => {} };
const expectHello = { cluster: "c", self: "A", authMode: "insecure" as const };
const otherCluster = { id: "B", cluster: "other", model: "m", protocol: PROTOCOL_VERSION };
// A refusal's wait far longer than any test: only stop() can end it.
const LONG = { firstMs: 600_000, maxMs: 600_000, afterChangeMs: 2_000 };

async function until(what: string, cond: () => boolean, ms = 10_000): Promise<void> {
  for (const t0 = Date.now(); !cond(); ) {
    if (Date.now() - t0 > ms) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** The static-peer check of B, asked through `client`, with its waits (a runtime double that admits). */
function staticChecks(client: PeerClient, timing: RecheckTiming) {
  const runtime = {
    isStopping: false,
    admin: { refusePeer: () => {}, notePeerHello: () => {}, readmitPeer: () => false },
  } as unknown as NodeRuntime;
  const waits = new RecheckWaits();
  const checks = new StaticPeerChecks([{ id: "B", url: "http://127.0.0.1:1" }], {
    client,
    runtime,
    logger: quiet,
    expect: expectHello,
    now: Date.now,
    timing,
    waits,
  });
  return { checks, waits };
}

describe("re-check waits", () => {
  it("a wait woken early resolves as run out and leaves no timer; stop still ends one that may be woken", async () => {
    const waits = new RecheckWaits();
    const wake = new AbortController();
    const woken = waits.wait(LONG.firstMs, wake.signal);
    expect(waits.size).toBe(1);
    wake.abort();
    expect(await woken).toBe(true);
    expect(waits.size).toBe(0);
    expect(await waits.wait(LONG.firstMs, wake.signal)).toBe(true); // woken before it began
    const stopped = waits.wait(LONG.firstMs, new AbortController().signal);
    waits.stop();
    expect(await stopped).toBe(false);
    expect(waits.size).toBe(0);
  });

  it("a refused static peer's check ends when its waits are stopped, not after its backoff", async () => {
    let hellos = 0;
    const client = {
      hello: async () => {
        hellos++;
        return otherCluster;
      },
    } as unknown as PeerClient;
    const { checks, waits } = staticChecks(client, LONG);
    let ended = false;
    void Promise.resolve(checks.start()).then(() => {
      ended = true;
    });
    await until("B refused", () => checks.view().length === 1);
    expect(waits.size).toBe(1);
    waits.stop();
    await until("the check ends", () => ended);
    expect(waits.size).toBe(0);
    expect(hellos).toBe(1);
  });

  it("a refused seed's wait ends when its waits are stopped", async () => {
    let probes = 0;
    const client = {
      probeHello: async () => {
        probes++;
        return { hello: otherCluster, certId: undefined };
      },
    } as unknown as PeerClient;
    const waits = new RecheckWaits();
    const states = resolveSeeds(["http://127.0.0.1:1"], {
      client,
      mesh: {} as MeshPeers,
      logger: quiet,
      expect: expectHello,
      isStopping: () => false,
      recheck: LONG,
      waits,
    });
    await until("the seed refused", () => states.view()[0]?.state === "refused");
    expect(waits.size).toBe(1);
    waits.stop();
    expect(waits.size).toBe(0);
    expect(await waits.wait(LONG.firstMs)).toBe(false);
    expect(probes).toBe(1);
  });

  it("a static peer refused again without a response MAC at its re-check: its backoff grows", async () => {
    let hellos = 0;
    const client = {
      hello: async () => {
        hellos++;
        throw new TransportError("http", "401 another shared secret", 401, true);
      },
    } as unknown as PeerClient;
    const { checks, waits } = staticChecks(client, { firstMs: 300, maxMs: 60_000, afterChangeMs: 2_000 });
    void checks.start();
    try {
      // UNAUTHENTICATED_TRIES unauthenticated refusals make one refusal, at the first check and again
      // at the re-check: two in a row, so the next wait is twice the first (refusals.ts).
      await until("B refused twice", () => checks.view()[0]?.refusals === 2, 45_000);
      expect(hellos).toBe(2 * UNAUTHENTICATED_TRIES);
    } finally {
      waits.stop();
    }
  });

  it("a refused static peer that does not answer its re-check shows when it is asked next, not 'due'", async () => {
    let hellos = 0;
    const client = {
      hello: async () => {
        hellos++;
        if (hellos === 1) return otherCluster;
        throw new TransportError("connection", "connect ECONNREFUSED 127.0.0.1:1");
      },
    } as unknown as PeerClient;
    const { checks, waits } = staticChecks(client, { firstMs: 300, maxMs: 60_000, afterChangeMs: 2_000 });
    void checks.start();
    try {
      // The re-check (after 300 ms) found nobody: the next is a backoff (at least 1 s) away, and
      // /cluster says so.
      await until("B's re-check not answered", () => hellos === 2 && waits.size === 1);
      const [b] = checks.view();
      expect(b?.refusals).toBe(1);
      expect(b?.recheckInMs).toBeGreaterThan(100);
      expect(b?.recheckInMs).toBeLessThanOrEqual(1_000); // a peer not answering is asked at most each second
      // Another unanswered re-check waits the same backoff, not one grown by the time waited.
      await until("a second re-check not answered", () => hellos === 3 && waits.size === 1);
      expect(checks.view()[0]?.recheckInMs).toBeLessThanOrEqual(1_000);
    } finally {
      waits.stop();
    }
  });
});
