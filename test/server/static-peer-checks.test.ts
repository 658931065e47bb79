/**
 * The full mesh's static peer check (static-peer-checks.ts) with fakes: when a static peer's
 * snapshots make it read the peer's hello again (a restart, or a check that gave up unanswered), and
 * how often a peer that gossips but never answers its hello is asked (fake timers: a simulated span).
 */
import pino from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { TransportError } from "../../src/net/transport-client.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import type { RuntimeLogger } from "../../src/server/runtime/logger.js";
import type { NodeRuntime } from "../../src/server/runtime/node-runtime.js";
import { RecheckWaits } from "../../src/server/runtime/recheck-waits.js";
import { StaticPeerChecks } from "../../src/server/runtime/static-peer-checks.js";

/** Waits that never wait: the check's retries run as fast as the fake answers. */
class NoWaits extends RecheckWaits {
  override wait(): Promise<boolean> {
    return Promise.resolve(!this.stopped);
  }
}

interface Overrides {
  waits?: RecheckWaits;
  now?: () => number;
  logger?: RuntimeLogger;
}

function setUp(answers: () => unknown, over: Overrides = {}) {
  // An answer may be a promise (a slow hello): awaited before it is thrown or returned.
  const noted: unknown[] = [];
  const refused: [string, string][] = [];
  let asked = 0;
  /** The operator URL each hello was given (where a cut-off may be checked for TLS). */
  const operatorUrls: unknown[] = [];
  const client = {
    hello: async (_id: string, operatorUrl?: string) => {
      asked++;
      operatorUrls.push(operatorUrl);
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
      refusePeer: (id: string, why: string) => refused.push([id, why]),
    },
  };
  const checks = new StaticPeerChecks([{ id: "B", url: "http://127.0.0.1:1" }], {
    client: client as never,
    runtime: runtime as unknown as NodeRuntime,
    logger: over.logger ?? pino({ level: "silent" }),
    expect: { cluster: "c", model: "m", self: "A", authMode: "none" as never, gossip: "full" },
    now: over.now ?? (() => 0),
    waits: over.waits ?? new NoWaits(),
  });
  return { checks, noted, refused, asked: () => asked, operatorUrls };
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

describe("static peer checks: the hello", () => {
  it("is given the configured address (--peers): only there is a cut-off checked for TLS", async () => {
    const { checks, operatorUrls } = setUp(() => hello(["m"]));
    await checks.start();
    expect(operatorUrls).toEqual(["http://127.0.0.1:1"]);
  });
});

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

  it("restarted into another cluster, it is refused with the reason, as a first check would", async () => {
    let cluster = "c";
    // A refusal's wait never ends here: one re-check of the restart is all this test reads.
    class Held extends RecheckWaits {
      override wait(): Promise<boolean> {
        return new Promise(() => {});
      }
    }
    const { checks, noted, refused } = setUp(() => ({ ...hello(["m"]), cluster }), { waits: new Held() });
    await checks.start();
    expect(noted).toHaveLength(1);
    checks.sawEpoch("B", 5);
    cluster = "other";
    checks.sawEpoch("B", 6);
    await until(() => refused.length === 1);
    expect(refused[0]?.[0]).toBe("B");
    expect(checks.view()).toEqual([
      expect.objectContaining({ id: "B", reason: expect.stringMatching(/^wrong-cluster: /) }),
    ]);
    expect(noted).toHaveLength(1);
  });

  it("is asked when its check gave up unanswered: it is up now", async () => {
    let up = false;
    let t = 0;
    const { checks, noted } = setUp(
      () => (up ? hello(["m"]) : new TransportError("connection", "connect ECONNREFUSED")),
      { now: () => t },
    );
    await checks.start(); // every hello unanswered: the check gives up
    expect(noted).toHaveLength(0);
    up = true;
    t = 1_000; // a second after the hello that gave up (no sooner: "not asked within 1 s")
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

describe("static peer checks: a static peer that gossips but never answers its hello", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  /**
   * B, asked on real waits under fake timers from 0 (the check's clock is Date.now, faked too), whose
   * hello times out while `answering` is false. `at` is when each hello was asked.
   */
  function silentPeer() {
    vi.useFakeTimers({ now: 0 });
    const waits = new RecheckWaits();
    const at: number[] = [];
    const warned: string[] = [];
    const peer = { answering: false };
    const logger: RuntimeLogger = {
      info: () => {},
      debug: () => {},
      error: () => {},
      warn: (_o, msg) => warned.push(msg ?? ""),
    };
    const { checks, noted } = setUp(
      () => {
        at.push(Date.now());
        return peer.answering ? hello(["m"]) : new TransportError("timeout", "hello timed out");
      },
      { waits, now: () => Date.now(), logger },
    );
    /** `s` seconds pass, B sending a snapshot at `epoch()` each second. */
    const gossip = async (s: number, epoch: () => number = () => 1) => {
      for (let i = 0; i < s; i++) {
        await vi.advanceTimersByTimeAsync(1_000);
        checks.sawEpoch("B", epoch());
      }
    };
    const gaps = (from = 0) => at.slice(from + 1).map((t, i) => t - (at[from + i] ?? 0));
    return { checks, noted, waits, at, warned, peer, gossip, gaps };
  }

  it("is asked on a backoff doubling to 30 s, for as long as it gossips, and never verified", async () => {
    const { checks, noted, waits, at, warned, gossip, gaps } = silentPeer();
    try {
      void checks.start();
      checks.sawEpoch("B", 1); // its first snapshot, while the start-up check asks
      await gossip(20 * 60);
      // Once a second before: 1,200 hellos in these 20 min.
      expect(gaps().slice(0, 6)).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000]);
      // Still asked, through the check giving up (MAX_UNANSWERED) and its snapshots starting it again.
      for (const g of gaps().slice(5)) expect(g).toBe(30_000);
      expect(at.at(-1)).toBeGreaterThan(20 * 60_000 - 30_000);
      expect(at.length).toBeLessThanOrEqual(6 + (20 * 60 - 31) / 30 + 1);
      expect(noted).toHaveLength(0);
      // One warning for the streak, as the backoff reached its ceiling.
      expect(warned).toEqual(["static peer does not answer its hello: backing off"]);
    } finally {
      waits.stop();
    }
  });

  it("starts its backoff over when it restarts, and again once it answered", async () => {
    const { checks, noted, waits, at, peer, gossip, gaps } = silentPeer();
    try {
      void checks.start();
      checks.sawEpoch("B", 1);
      await gossip(5 * 60);
      expect(gaps().at(-1)).toBe(30_000);
      // A restart cuts the 30 s wait short: asked at once, then 1 s, 2 s later.
      const restartAt = Date.now();
      const n = at.length;
      checks.sawEpoch("B", 2);
      await gossip(3, () => 2);
      expect(at.slice(n)).toEqual([restartAt, restartAt + 1_000, restartAt + 3_000]);
      // It answers at its next hello (4 s on): verified.
      peer.answering = true;
      await gossip(4, () => 2);
      expect(noted).toHaveLength(1);
      expect(at.at(-1)).toBe(restartAt + 7_000);
      // Restarted again and silent, within 30 s of the last restart (which alone would not end a
      // backoff again so soon): the answer ended it, so it is asked 1 s, then 2 s apart again.
      peer.answering = false;
      const m = at.length;
      checks.sawEpoch("B", 3);
      await gossip(6, () => 3);
      expect(gaps(m).slice(0, 2)).toEqual([1_000, 2_000]);
      expect(noted).toHaveLength(1);
    } finally {
      waits.stop();
    }
  });

  // Its check gave up (MAX_UNANSWERED) at a hello; its first snapshot then ends the backoff, but a
  // hello at once would be the second within a second.
  it("a snapshot ending its backoff just after its check gave up is not asked within 1 s", async () => {
    const { checks, waits, at, gossip, gaps } = silentPeer();
    try {
      const done = checks.start();
      let ended = false;
      void done.then(() => {
        ended = true;
      });
      while (!ended) await vi.advanceTimersByTimeAsync(1_000);
      const n = at.length;
      checks.sawEpoch("B", 1); // at once: the hello that gave up was asked this very moment
      await gossip(5);
      expect(at.length).toBeGreaterThan(n);
      for (const g of gaps(n - 1)) expect(g).toBeGreaterThanOrEqual(1_000);
    } finally {
      waits.stop();
    }
  });

  it("claiming a new epoch in every snapshot ends its backoff at most once per 30 s", async () => {
    const { checks, noted, waits, at, gossip, gaps } = silentPeer();
    try {
      void checks.start();
      let epoch = 1;
      checks.sawEpoch("B", epoch);
      await gossip(10 * 60, () => ++epoch);
      // Each 30 s: asked at the reset, then 1, 2, 4, 8 s later (16 s on is the next reset).
      expect(at.length).toBeLessThanOrEqual(((10 * 60) / 30) * 5 + 5);
      for (const g of gaps()) expect(g).toBeGreaterThanOrEqual(1_000);
      expect(noted).toHaveLength(0);
    } finally {
      waits.stop();
    }
  });
});
