/**
 * The seed's "joining node unreachable" warning is said of a node that keeps sending to us while our
 * answers fail, never of one killed (it sends nothing, yet a seed's reconnect push-pulls and a lone
 * node's joins keep failing to it), and at most once a minute per node even when its failures pause.
 */
import { describe, expect, it } from "vitest";
import type { RuntimeLogger } from "../../src/server/runtime/logger.js";
import { UndeliveredMesh } from "../../src/server/runtime/undelivered-mesh.js";

function harness() {
  let t = 0;
  const warned: Record<string, unknown>[] = [];
  const logger = { debug() {}, warn: (f: Record<string, unknown>) => void warned.push(f) };
  const u = new UndeliveredMesh(() => t);
  const err = new Error("ECONNREFUSED");
  return {
    u,
    warned,
    /** `ms` of sends to `id` every `everyMs`, each failing; `heard`: `id` sends to us meanwhile. */
    run(id: string, ms: number, everyMs: number, heard: boolean, member = false) {
      for (const end = t + ms; t < end; t += everyMs) {
        if (heard) u.heard(id);
        u.failed(logger as unknown as RuntimeLogger, id, "https://10.0.0.9:9080", err, member);
      }
    },
    pause(ms: number) {
      t += ms;
    },
  };
}

describe("undelivered mesh messages to a non-member", () => {
  it("a joiner still sending to us whose answers fail for 10 s is said once a minute", () => {
    const h = harness();
    h.run("J", 9_000, 1_000, true);
    expect(h.warned).toEqual([]);
    h.run("J", 62_000, 1_000, true);
    expect(h.warned).toHaveLength(2);
    expect(h.warned[0]).toMatchObject({ peer: "J", url: "https://10.0.0.9:9080" });
  });

  it("a killed node is never said: its failures come with nothing heard from it", () => {
    const h = harness();
    h.run("dead-seed", 120_000, 1_000, false); // a lone node asking its dead seed each probe period
    h.run("dead-member", 120_000, 4_900, false); // a seed's reconnect push-pull to its one tombstone
    expect(h.warned).toEqual([]);
  });

  it("a node whose failures pause and resume is still said at most once a minute", () => {
    const h = harness();
    for (let i = 0; i < 6; i++) {
      h.run("F", 12_000, 1_000, true);
      h.pause(6_000);
    }
    expect(h.warned).toHaveLength(2);
  });

  it("a member's failures are forgotten, and stale entries go when a new one is tracked", () => {
    const h = harness();
    h.run("M", 20_000, 1_000, true, true);
    expect(h.warned).toEqual([]);
    expect(h.u.size).toBe(0);
    h.run("A", 1_000, 1_000, false);
    h.pause(61_000);
    h.run("B", 1_000, 1_000, false);
    expect(h.u.size).toBe(1);
  });
});
