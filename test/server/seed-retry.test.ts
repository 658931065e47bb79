/** A `--join` seed that never answers: retried for as long as the node runs, and the log keeps saying so. */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { PeerClient } from "../../src/net/transport-client.js";
import { TransportError } from "../../src/net/transport-error.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import type { RuntimeLogger } from "../../src/server/runtime/logger.js";
import type { MeshPeers } from "../../src/server/runtime/mesh-peers.js";
import { resolveSeeds } from "../../src/server/runtime/mesh-seeds.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("a seed that never answers", () => {
  it("is retried until the node stops, with a warning at first and about once a minute after", async () => {
    vi.useFakeTimers();
    let probes = 0;
    const client = {
      probeHello: () => {
        probes++;
        return Promise.reject(new Error("connect ECONNREFUSED 127.0.0.1:1"));
      },
    } as unknown as PeerClient;
    const warnings: Record<string, unknown>[] = [];
    const logger: RuntimeLogger = {
      info: () => {},
      debug: () => {},
      error: () => {},
      warn: (obj, msg) => void warnings.push({ ...obj, msg }),
    };
    let stopping = false;
    resolveSeeds(["http://127.0.0.1:1"], {
      client,
      mesh: {} as MeshPeers,
      logger,
      expect: { cluster: "c", self: "A", authMode: "insecure" },
      isStopping: () => stopping,
    });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]?.msg).toMatch(/seed not answering yet.*retrying/);
    // Five more minutes: still probing every couple of seconds, and the log says so each minute.
    await vi.advanceTimersByTimeAsync(5 * 60_000);
    expect(probes).toBeGreaterThan(150);
    expect(warnings.length).toBeGreaterThanOrEqual(5);
    expect(warnings.length).toBeLessThanOrEqual(7);
    const last = warnings.at(-1) as { attempts: number; waitedS: number; msg: string };
    expect(last.msg).toMatch(/seed still not answering/);
    expect(last.attempts).toBeGreaterThan(150);
    expect(last.waitedS).toBeGreaterThanOrEqual(290);
    stopping = true;
    const after = probes;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(probes).toBeLessThanOrEqual(after + 1);
  });
});

describe("a seed whose name does not resolve yet", () => {
  it("is retried with a bounded backoff, said to be unresolved, and joined once the name resolves", async () => {
    vi.useFakeTimers();
    // The transport's own failure for a name DNS does not know (a pod's peers before they exist).
    let resolvable = false;
    const probes: number[] = [];
    const client = {
      probeHello: () => {
        probes.push(Date.now());
        if (!resolvable)
          return Promise.reject(
            new TransportError("connection", "ENOTFOUND: getaddrinfo ENOTFOUND seed.invalid"),
          );
        return Promise.resolve({
          hello: { id: "S", cluster: "c", model: "m", protocol: PROTOCOL_VERSION },
          certId: undefined,
        });
      },
    } as unknown as PeerClient;
    const warnings: Record<string, unknown>[] = [];
    const logger: RuntimeLogger = {
      info: () => {},
      debug: () => {},
      error: () => {},
      warn: (obj, msg) => void warnings.push({ ...obj, msg }),
    };
    const seeded: string[] = [];
    const mesh = {
      seed: (id: string, url: string) => void seeded.push(`${id} ${url}`),
    } as unknown as MeshPeers;
    resolveSeeds(["http://seed.invalid:9080"], {
      client,
      mesh,
      logger,
      expect: { cluster: "c", self: "A", authMode: "insecure" },
      isStopping: () => false,
    });
    await vi.advanceTimersByTimeAsync(10_000);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ seed: "http://seed.invalid:9080" });
    expect(warnings[0]?.msg).toMatch(/seed's name does not resolve \(yet\).*retrying every 2 s/);
    // The backoff is bounded: after its first steps, one probe every 2 s.
    const gaps = probes.slice(1).map((t, i) => t - (probes[i] as number));
    expect(Math.max(...gaps)).toBeLessThanOrEqual(2_000);
    expect(gaps.at(-1)).toBe(2_000);
    expect(seeded).toEqual([]);
    resolvable = true;
    await vi.advanceTimersByTimeAsync(2_000);
    expect(seeded).toEqual(["S http://seed.invalid:9080"]);
    const after = probes.length;
    await vi.advanceTimersByTimeAsync(10_000);
    expect(probes.length).toBe(after);
  });
});
