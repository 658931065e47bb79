/**
 * The full mesh's static peer check (static-peer-checks.ts) with fakes: when a static peer's
 * snapshots make it read the peer's hello again (a restart, or a check that gave up unanswered).
 */
import pino from "pino";
import { describe, expect, it } from "vitest";
import { TransportError } from "../../src/net/transport-client.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import type { NodeRuntime } from "../../src/server/runtime/node-runtime.js";
import { RecheckWaits } from "../../src/server/runtime/recheck-waits.js";
import { StaticPeerChecks } from "../../src/server/runtime/static-peer-checks.js";

/** Waits that never wait: the check's retries run as fast as the fake answers. */
class NoWaits extends RecheckWaits {
  override wait(): Promise<boolean> {
    return Promise.resolve(!this.stopped);
  }
}

function setUp(answers: () => unknown) {
  // An answer may be a promise (a slow hello): awaited before it is thrown or returned.
  const noted: unknown[] = [];
  let asked = 0;
  const client = {
    hello: async () => {
      asked++;
      const a = await answers();
      if (a instanceof Error) throw a;
      return a;
    },
  };
  const runtime = {
    isStopping: false,
    admin: {
      notePeerHello: (_id: string, h: unknown) => noted.push(h),
      readmitPeer: () => false,
      refusePeer: () => {},
    },
  };
  const checks = new StaticPeerChecks([{ id: "B", url: "http://127.0.0.1:1" }], {
    client: client as never,
    runtime: runtime as unknown as NodeRuntime,
    logger: pino({ level: "silent" }),
    expect: { cluster: "c", model: "m", self: "A", authMode: "none" as never, gossip: "full" },
    now: () => 0,
    waits: new NoWaits(),
  });
  return { checks, noted, asked: () => asked };
}

const hello = (models: string[]) => ({
  id: "B",
  cluster: "c",
  model: "m",
  protocol: PROTOCOL_VERSION,
  models,
});
const until = async (cond: () => boolean) => {
  for (const t0 = Date.now(); !cond() && Date.now() - t0 < 10_000; )
    await new Promise((r) => setTimeout(r, 5));
};

describe("static peer checks: a static peer seen in a snapshot", () => {
  it("is asked again when its epoch rises, not for the same epoch or an older one", async () => {
    let models = ["m"];
    const { checks, noted, asked } = setUp(() => hello(models));
    await checks.start();
    expect(noted).toHaveLength(1);
    checks.sawEpoch("B", 5);
    checks.sawEpoch("B", 5);
    checks.sawEpoch("B", 4);
    checks.sawEpoch("C", 9); // no static peer: ignored
    // No wait needed: a check started asks its first hello before sawEpoch returns.
    expect(asked()).toBe(1);
    models = ["m", "lora"];
    checks.sawEpoch("B", 6);
    await until(() => noted.length === 2);
    expect(noted[1]).toMatchObject({ models: ["m", "lora"] });
    expect(asked()).toBe(2);
  });

  it("is asked when its check gave up unanswered: it is up now", async () => {
    let up = false;
    const { checks, noted } = setUp(() =>
      up ? hello(["m"]) : new TransportError("connection", "connect ECONNREFUSED"),
    );
    await checks.start(); // every hello unanswered: the check gives up
    expect(noted).toHaveLength(0);
    up = true;
    checks.sawEpoch("B", 1);
    await until(() => noted.length === 1);
    expect(noted).toHaveLength(1);
  });
});

describe("static peer checks: an epoch seen while its check runs", () => {
  it("is still the one a later restart is told from", async () => {
    let release: (() => void) | undefined;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let first = true;
    const { checks, noted, asked } = setUp(async () => {
      if (first) {
        first = false;
        await gate; // the start-up check's hello, slow to come
      }
      return hello(["m"]);
    });
    const started = checks.start();
    checks.sawEpoch("B", 5); // its first snapshot, while that check runs
    release?.();
    await started;
    expect(noted).toHaveLength(1);
    checks.sawEpoch("B", 6);
    await until(() => noted.length === 2);
    expect(noted).toHaveLength(2);
    expect(asked()).toBe(2);
  });
});
