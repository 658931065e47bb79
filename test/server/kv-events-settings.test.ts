/** The --engine-kv-* settings: validated where they come from, and turned into the engine's kvEvents. */
import { describe, expect, it } from "vitest";
import type { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { loadEngine } from "../../src/server/runtime/engine-loader.js";
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
});
