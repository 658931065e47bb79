/** Maps a node's settings to an engine spec for `createEngine` (src/engines/factory.ts). */
import { existsSync } from "node:fs";
import type { Engine } from "../../core/engine.js";
import { createEngine, type EngineSpec } from "../../engines/factory.js";
import { envName, flagName, SettingsError, settingDefaultValue } from "../settings/index.js";

export interface EngineSettings {
  engine: "llamacpp" | "openai" | "sim";
  model: string;
  engineUrl?: string | undefined;
  engineApiKey?: string | undefined;
  engineKvEvents?: string | undefined;
  engineKvReplay?: string | undefined;
  engineKvTopic?: string | undefined;
  engineKvRank?: number | undefined;
  engineKvGroup?: number | undefined;
  engineKvReplayTimeoutMs?: number | undefined;
  engineKvProbeMs?: number | undefined;
  engineKvSettleMs?: number | undefined;
  engineKvQueueBatches?: number | undefined;
  engineKvQueueBytes?: number | undefined;
  engineTokenizer?: "auto" | "server" | "local" | undefined;
  engineCacheMirror?: "auto" | "lru" | "llama-slots" | undefined;
  engineCacheRam?: number | undefined;
  engineSlotSaves?: number | undefined;
  engineContextTokens?: number | undefined;
  capacityTokens?: number | undefined;
  simProfile?: string | undefined;
  simTimeScale?: number | undefined;
  threads?: number | undefined;
  slots?: number | undefined;
  savedStates?: number | undefined;
  slotContext?: number | undefined;
}

/** `--model generated` means the benchmark-sized generated model (~57M params): no download needed. */
export const DEFAULT_GENERATED = "generated:bench";

/** Exported for tests: what each setting becomes. */
export function engineSpec(s: EngineSettings): EngineSpec {
  if (s.engine !== "openai") {
    const stray = REMOTE_ONLY.find((k) => s[k] !== undefined);
    // Named with its variable too: a node a launcher spawns may have it from the environment.
    if (stray)
      throw new SettingsError(
        `${flagName(stray)} needs --engine openai (a remote server's setting; from ${envName(stray)}?)`,
      );
  }
  switch (s.engine) {
    case "sim":
      // Its model is its cost profile (`sim:<profile>`): a model named here would run as that, unsaid.
      if (s.model !== "generated")
        throw new SettingsError(
          `${flagName("model")} needs --engine llamacpp or openai: the sim engine runs no model ` +
            `(--sim-profile sets its costs; from ${envName("model")}?)`,
        );
      return {
        kind: "sim",
        ...(s.simProfile ? { profile: s.simProfile } : {}),
        ...(s.capacityTokens ? { capacityTokens: s.capacityTokens } : {}),
        // timeScale 0 (instant engine, for overhead benchmarks) is below the factory's range: use the
        // smallest.
        ...(s.simTimeScale !== undefined ? { timeScale: Math.max(s.simTimeScale, 1e-9) } : {}),
      };
    case "llamacpp":
      // A usage error (exit 2), not an engine failure: the flag names a file that is not there.
      if (!s.model.startsWith("generated") && !existsSync(s.model))
        throw new SettingsError(`--model ${s.model}: no such file (a GGUF file, or 'generated')`);
      return {
        kind: "llamacpp",
        model: s.model === "generated" ? DEFAULT_GENERATED : s.model,
        ...(s.threads ? { threads: s.threads } : {}),
        ...(s.slots ? { slots: s.slots } : {}),
        ...(s.savedStates !== undefined ? { maxSavedStates: s.savedStates } : {}),
        ...(s.slotContext ? { slotContext: s.slotContext } : {}),
      };
    case "openai":
      if (!s.engineUrl)
        throw new SettingsError("--engine openai needs --engine-url (the remote server's base URL)");
      return {
        kind: "openai",
        baseUrl: s.engineUrl,
        model: s.model,
        ...(s.engineApiKey ? { apiKey: s.engineApiKey } : {}),
        ...(s.engineTokenizer ? { tokenizer: s.engineTokenizer } : {}),
        ...(s.engineContextTokens ? { maxContextTokens: s.engineContextTokens } : {}),
        ...(s.engineCacheMirror ? { cacheMirror: s.engineCacheMirror } : {}),
        llamaSlots: {
          ...(s.engineCacheRam !== undefined ? { cacheRamMiB: s.engineCacheRam } : {}),
          ...(s.engineSlotSaves !== undefined ? { savedSlots: s.engineSlotSaves } : {}),
        },
        ...(s.capacityTokens ? { capacityTokens: s.capacityTokens } : {}),
        ...kvEvents(s),
      };
  }
}

/**
 * Settings only a remote server has: refused with another engine, never silently ignored. Not the API
 * key: a secret an environment may hold for every node, whatever each one runs.
 */
const REMOTE_ONLY = [
  "engineUrl",
  "engineTokenizer",
  "engineContextTokens",
  "engineCacheMirror",
  "engineCacheRam",
  "engineSlotSaves",
  "engineKvEvents",
  "engineKvReplay",
  "engineKvTopic",
  "engineKvRank",
  "engineKvGroup",
  "engineKvReplayTimeoutMs",
  "engineKvProbeMs",
  "engineKvSettleMs",
  "engineKvQueueBatches",
  "engineKvQueueBytes",
] as const satisfies readonly (keyof EngineSettings)[];

/**
 * The remote engine's `kvEvents` from the --engine-kv-* settings. All but the endpoint tune the
 * stream, so they need it; the replay's timeout and the idle probe (a replay) need the replay
 * endpoint too: refused, never silently ignored.
 */
function kvEvents(s: EngineSettings): Pick<Extract<EngineSpec, { kind: "openai" }>, "kvEvents"> {
  const set = (keys: readonly (keyof EngineSettings)[]) => keys.find((k) => s[k] !== undefined);
  const replayOnly = ["engineKvReplayTimeoutMs", "engineKvProbeMs"] as const;
  if (!s.engineKvEvents) {
    const stray = set([
      "engineKvReplay",
      "engineKvTopic",
      "engineKvRank",
      "engineKvGroup",
      "engineKvSettleMs",
      "engineKvQueueBatches",
      "engineKvQueueBytes",
      ...replayOnly,
    ]);
    if (stray) throw new SettingsError(`${flagName(stray)} needs --engine-kv-events`);
    return {};
  }
  const stray = s.engineKvReplay ? undefined : set(replayOnly);
  if (stray)
    throw new SettingsError(`${flagName(stray)} needs --engine-kv-replay (without it there are no replays)`);
  return {
    kvEvents: {
      endpoint: s.engineKvEvents,
      ...(s.engineKvReplay ? { replayEndpoint: s.engineKvReplay } : {}),
      ...(s.engineKvTopic !== undefined ? { topic: s.engineKvTopic } : {}),
      ...(s.engineKvRank !== undefined ? { rank: s.engineKvRank } : {}),
      ...(s.engineKvGroup !== undefined ? { group: s.engineKvGroup } : {}),
      ...(s.engineKvReplayTimeoutMs !== undefined ? { replayTimeoutMs: s.engineKvReplayTimeoutMs } : {}),
      ...(s.engineKvProbeMs !== undefined ? { probeIntervalMs: s.engineKvProbeMs } : {}),
      ...(s.engineKvSettleMs !== undefined ? { settleMs: s.engineKvSettleMs } : {}),
      ...(s.engineKvQueueBatches !== undefined ? { maxQueuedBatches: s.engineKvQueueBatches } : {}),
      ...(s.engineKvQueueBytes !== undefined ? { maxQueuedBytes: s.engineKvQueueBytes } : {}),
    },
  };
}

/**
 * The engine the settings name. `log` takes its degraded-but-handled events (a remote server not
 * answering yet, a saved state that failed to load): the node's own logger, so they are JSON lines
 * with the others rather than plain text on stderr.
 */
export async function loadEngine(
  s: EngineSettings,
  log?: (msg: string, fields: Record<string, unknown>) => void,
): Promise<Engine> {
  const spec = engineSpec(s);
  for (const k of unusedEngineSettings(s))
    log?.(`${flagName(k)} is not used by --engine ${s.engine}: ignored`, {
      setting: k,
      variable: envName(k),
    });
  return createEngine(spec, log ? { log } : {});
}

/** Each engine's own settings, which another engine does not read (the remote one's are refused). */
const ENGINE_ONLY = {
  llamacpp: ["threads", "slots", "savedStates", "slotContext"],
  sim: ["simProfile", "simTimeScale"],
} as const satisfies Record<string, readonly (keyof EngineSettings)[]>;

/**
 * The settings given that the chosen engine does not read: said, not refused, since a shared
 * environment (the Kubernetes manifest, an env file) may carry the embedded engine's next to a
 * remote one's, and nothing breaks; silent, a tuning that does nothing looks applied.
 */
export function unusedEngineSettings(s: EngineSettings): (keyof EngineSettings)[] {
  // A setting with a default is held by resolved settings whether given or not: at it, not given.
  return Object.entries(ENGINE_ONLY).flatMap(([engine, keys]) =>
    engine === s.engine ? [] : keys.filter((k) => s[k] !== undefined && s[k] !== settingDefaultValue(k)),
  );
}
