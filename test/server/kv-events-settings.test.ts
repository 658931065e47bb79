/** The --engine-kv-* settings: validated where they come from, and turned into the engine's kvEvents. */
import { describe, expect, it } from "vitest";
import { KvEventsOptionsSchema } from "../../src/engines/kv-events/options.js";
import type { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { engineSpec, loadEngine } from "../../src/server/runtime/engine-loader.js";
import { envName, resolveNodeSettings } from "../../src/server/settings/index.js";

const base = { id: "A", engine: "openai", model: "m", engineUrl: "http://127.0.0.1:1" };

describe("KV-event settings", () => {
  it("take flags and PREFIXMESH_* variables, and name the source of a bad endpoint", () => {
    const s = resolveNodeSettings(
      { ...base, engineKvEvents: "tcp://127.0.0.1:5557", engineKvTopic: "kv" },
      { [envName("engineKvReplay")]: "tcp://127.0.0.1:5558", [envName("engineKvRank")]: "1" },
    );
    expect(s).toMatchObject({
      engineKvEvents: "tcp://127.0.0.1:5557",
      engineKvReplay: "tcp://127.0.0.1:5558",
      engineKvTopic: "kv",
      engineKvRank: 1,
    });
    expect(envName("engineKvEvents")).toBe("PREFIXMESH_ENGINE_KV_EVENTS");
    expect(() => resolveNodeSettings({ ...base, engineKvEvents: "127.0.0.1:5557" }, {})).toThrow(
      /--engine-kv-events: must be tcp:\/\/HOST:PORT/,
    );
    expect(() => resolveNodeSettings({ ...base, engineKvEvents: "tcp://h:99999" }, {})).toThrow(/≤ 65535/);
  });

  it("make the remote engine engine-managed; a replay endpoint alone is an error", async () => {
    const s = resolveNodeSettings({ ...base, engineKvEvents: "tcp://127.0.0.1:5557", engineKvRank: "2" }, {});
    const engine = (await loadEngine(s)) as OpenAIEngine;
    try {
      expect(engine.info.cacheMode).toBe("engine-managed");
      expect(engine.kvEventsStatus()).toMatchObject({ exact: false, subscriber: { synced: false } });
    } finally {
      await engine.close();
    }
    const plain = await loadEngine(resolveNodeSettings(base, {}));
    expect(plain.info.cacheMode).toBe("node-managed");
    await plain.close();
    await expect(
      loadEngine(resolveNodeSettings({ ...base, engineKvReplay: "tcp://127.0.0.1:5558" }, {})),
    ).rejects.toThrow(/--engine-kv-replay needs --engine-kv-events/);
  });

  it("tune the stream: group, replay timeout, probe, settle wait and queue bound reach kvEvents", () => {
    const kv = { ...base, engineKvEvents: "tcp://127.0.0.1:5557", engineKvReplay: "tcp://127.0.0.1:5558" };
    const s = resolveNodeSettings(
      { ...kv, engineKvGroup: "1", engineKvReplayTimeoutMs: "10000", engineKvProbeMs: "0" },
      {
        [envName("engineKvSettleMs")]: "200",
        [envName("engineKvQueueBatches")]: "16384",
        [envName("engineKvQueueBytes")]: "1048576",
      },
    );
    expect(envName("engineKvReplayTimeoutMs")).toBe("PREFIXMESH_ENGINE_KV_REPLAY_TIMEOUT_MS");
    const spec = engineSpec(s);
    if (spec.kind !== "openai") throw new Error("not the openai engine");
    const options = {
      group: 1,
      replayTimeoutMs: 10_000,
      probeIntervalMs: 0,
      settleMs: 200,
      maxQueuedBatches: 16_384,
      maxQueuedBytes: 1 << 20,
    };
    expect(spec.kvEvents).toMatchObject(options);
    expect(KvEventsOptionsSchema.parse(spec.kvEvents)).toMatchObject(options);
    // Unset, the engine's own defaults hold.
    const plain = engineSpec(resolveNodeSettings(kv, {}));
    expect(plain.kind === "openai" && plain.kvEvents).toEqual({
      endpoint: "tcp://127.0.0.1:5557",
      replayEndpoint: "tcp://127.0.0.1:5558",
    });
  });

  it("bound them as the engine's options do, naming the source", () => {
    const kv = { ...base, engineKvEvents: "tcp://127.0.0.1:5557" };
    const bad: [Record<string, string>, RegExp][] = [
      [{ engineKvReplayTimeoutMs: "5" }, /--engine-kv-replay-timeout-ms: must be ≥ 10/],
      [{ engineKvReplayTimeoutMs: "600001" }, /--engine-kv-replay-timeout-ms: must be ≤ 600000/],
      [{ engineKvGroup: "-1" }, /--engine-kv-group: must be ≥ 0/],
      [{ engineKvGroup: "1.5" }, /--engine-kv-group/],
      [{ engineKvSettleMs: "10001" }, /--engine-kv-settle-ms: must be ≤ 10000/],
      [{ engineKvProbeMs: "3600001" }, /--engine-kv-probe-ms: must be ≤ 3600000/],
      [{ engineKvQueueBatches: "0" }, /--engine-kv-queue-batches: must be ≥ 1/],
      [{ engineKvQueueBatches: "" }, /--engine-kv-queue-batches: must be a number/],
      [{ engineKvQueueBytes: "65535" }, /--engine-kv-queue-bytes: must be ≥ 65536/],
      [{ engineKvQueueBytes: "4294967297" }, /--engine-kv-queue-bytes: must be ≤ 4294967296/],
      [{ engineKvSettleMs: "soon" }, /--engine-kv-settle-ms/],
    ];
    for (const [flags, msg] of bad) expect(() => resolveNodeSettings({ ...kv, ...flags }, {})).toThrow(msg);
    expect(() => resolveNodeSettings(kv, { [envName("engineKvGroup")]: "x" })).toThrow(
      /PREFIXMESH_ENGINE_KV_GROUP/,
    );
  });

  it("refuse them without the stream, and the replay's without a replay endpoint", () => {
    for (const [key, flag, value] of [
      ["engineKvGroup", "--engine-kv-group"],
      ["engineKvReplayTimeoutMs", "--engine-kv-replay-timeout-ms"],
      ["engineKvProbeMs", "--engine-kv-probe-ms"],
      ["engineKvSettleMs", "--engine-kv-settle-ms"],
      ["engineKvQueueBatches", "--engine-kv-queue-batches"],
      ["engineKvQueueBytes", "--engine-kv-queue-bytes", "100000"],
    ] as const)
      expect(() => engineSpec(resolveNodeSettings({ ...base, [key]: value ?? "100" }, {}))).toThrow(
        new RegExp(`^${flag} needs --engine-kv-events$`),
      );
    const noReplay = { ...base, engineKvEvents: "tcp://127.0.0.1:5557" };
    expect(() => engineSpec(resolveNodeSettings({ ...noReplay, engineKvProbeMs: "100" }, {}))).toThrow(
      /--engine-kv-probe-ms needs --engine-kv-replay/,
    );
    expect(() =>
      engineSpec(resolveNodeSettings({ ...noReplay, engineKvReplayTimeoutMs: "100" }, {})),
    ).toThrow(/--engine-kv-replay-timeout-ms needs --engine-kv-replay/);
    // Those that tune the live stream alone need no replay endpoint.
    const spec = engineSpec(
      resolveNodeSettings({ ...noReplay, engineKvSettleMs: "0", engineKvGroup: "2" }, {}),
    );
    expect(spec.kind === "openai" && spec.kvEvents).toMatchObject({ settleMs: 0, group: 2 });
  });

  it("refuse, with every remote server's setting, an engine that is not one", () => {
    for (const engine of ["sim", "llamacpp"])
      for (const [key, value, flag] of [
        ["engineKvEvents", "tcp://127.0.0.1:5557", "--engine-kv-events"],
        ["engineKvSettleMs", "10", "--engine-kv-settle-ms"],
        ["engineUrl", "http://127.0.0.1:1", "--engine-url"],
        ["engineCacheMirror", "lru", "--engine-cache-mirror"],
      ] as const)
        expect(() =>
          engineSpec(resolveNodeSettings({ id: "A", engine, model: "generated", [key]: value }, {})),
        ).toThrow(new RegExp(`^${flag} needs --engine openai .*PREFIXMESH_`));
    // The API key is an environment's secret, maybe set for every node: not refused.
    expect(engineSpec(resolveNodeSettings({ id: "A", engine: "sim", engineApiKey: "k" }, {})).kind).toBe(
      "sim",
    );
  });
});
