/**
 * Node configuration from three sources, highest precedence first: command-line flags, `PREFIXMESH_*`
 * environment variables (e.g. PREFIXMESH_POLL_MS=200), then a YAML file (`--config`, keys in camelCase
 * or kebab-case, e.g. `poll-ms: 200`). Everything is validated with zod; a problem is one clear line
 * naming the setting and where it came from.
 */
import { readFileSync, statSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { nodeConfigSchema } from "../core/node/config.js";
import { POLICY_NAMES } from "../core/node/policies/index.js";
import { MAX_CONTEXT_TOKENS, TOKENIZER_CHOICES } from "../engines/openai/options.js";
import { nodeIdSchema } from "../net/node-id.js";
import { DEFAULT_POLICY } from "./default-policy.js";
import { MAX_CPU_LATENCY_US } from "./runtime/cpu-latency-qos.js";

/** A setting that is missing, malformed or out of bounds: one line naming it and where it came from. */
export class SettingsError extends Error {
  /** A usage error, as the CLI reports it. */
  readonly exitCode = 2;
  constructor(message: string) {
    super(message);
    this.name = "SettingsError";
  }
}

const hostPort = z
  .string()
  .regex(/^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}$/, "must be HOST:PORT, e.g. 127.0.0.1:8080")
  .refine((s) => Number(s.slice(s.lastIndexOf(":") + 1)) <= 65535, "port must be ≤ 65535");

const num = (min: number, max: number, int = false) => {
  const base = int ? z.coerce.number().int() : z.coerce.number();
  return base.min(min).max(max);
};
export type NodeConfigNumberKey =
  | "concurrency"
  | "forwardTimeoutMs"
  | "forwardAckTimeoutMs"
  | "forwardResends";
/**
 * A core node-config number as a flag, env or YAML value gives it: non-blank, coerced, bounded by the
 * core node's own schema (the bounds are stated once, in src/core/node/config.ts).
 */
export const nodeConfigNumber = (key: NodeConfigNumberKey) =>
  z
    .union([z.number(), z.string().trim().min(1, "must be a number")])
    .transform(Number)
    .pipe(nodeConfigSchema.shape[key].unwrap());
/** The same with the daemon's default. */
const nodeNum = (key: Exclude<NodeConfigNumberKey, "forwardResends">, daemonDefault: number) =>
  nodeConfigNumber(key).default(daemonDefault);
const bool = z.union([
  z.boolean(),
  z.enum(["true", "false", "1", "0"]).transform((s) => s === "true" || s === "1"),
]);

export const nodeSettingsSchema = z.object({
  id: nodeIdSchema,
  listen: hostPort.default("127.0.0.1:8080"),
  peerListen: hostPort.default("127.0.0.1:9080"),
  /** `B=http://…,C=…` or (YAML) a list of {id, url} / a map id → url. */
  peers: z.union([z.string().max(65536), z.array(z.unknown()), z.record(z.string(), z.string())]).optional(),
  /** `name[:port]`: peers are every A/AAAA record of the name (port: default our peer port). */
  peersDns: z.string().max(300).optional(),
  /** How often the --peers-dns name is re-resolved (and DNS-found peers re-checked), ms. */
  peersDnsIntervalMs: num(100, 3_600_000, true).default(10_000),
  /**
   * Answer --peers-dns look-ups from this JSON file ({"name": ["10.0.0.7", …]}), re-read each round,
   * instead of DNS: for tests and for environments that publish peer addresses as a file.
   */
  peersDnsFile: z.string().min(1).max(4096).optional(),
  /** Most peers at once, static + DNS-found (DNS-found ones beyond it are refused). */
  maxPeers: num(1, 256, true).default(256),
  engine: z.enum(["llamacpp", "openai", "sim"]).default("llamacpp"),
  model: z.string().min(1).max(4096).default("generated"),
  /** openai engine: the remote server's base URL, and its API key (prefer the env variable). */
  engineUrl: z.string().url().max(2048).optional(),
  engineApiKey: z.string().max(4096).optional(),
  /** openai engine: tokenize with the server's /tokenize (auto: when it has one), or locally. */
  engineTokenizer: z
    .enum(TOKENIZER_CHOICES, { error: `must be one of ${TOKENIZER_CHOICES.join(", ")}` })
    .optional(),
  /** openai engine: context tokens per request when the server reports none (else the server's). */
  engineContextTokens: num(1, MAX_CONTEXT_TOKENS, true).optional(),
  policy: z.enum(POLICY_NAMES).default(DEFAULT_POLICY),
  pollMs: num(1, 3_600_000).default(500),
  clusterId: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,64}$/)
    .optional(),
  tlsDir: z.string().min(1).max(4096).optional(),
  secretFile: z.string().min(1).max(4096).optional(),
  insecure: bool.default(false),
  injectDelayMs: num(0, 60_000).default(0),
  injectJitterMs: num(0, 60_000).default(0),
  /** KV capacity in tokens (default: the engine's). */
  capacityTokens: num(1, 1e9, true).optional(),
  concurrency: nodeNum("concurrency", 1),
  forwardTimeoutMs: nodeNum("forwardTimeoutMs", 30_000),
  /**
   * A forward not acked in max(this, 4 × RTT) falls back. Higher than the simulator's 250 ms: over TCP
   * nothing is lost silently, so the ack only guards against a frozen or black-holed peer, and a busy
   * machine must not turn slow acks into spurious fallbacks (duplicate work).
   */
  forwardAckTimeoutMs: nodeNum("forwardAckTimeoutMs", 1_000),
  /** Forwards multiplexed on one WebSocket per peer ("channel"), or one HTTP request each ("http"). */
  forwardTransport: z.enum(["channel", "http"]).default("channel"),
  /** Client requests admitted at once; beyond: 429. */
  maxPending: num(1, 100_000, true).default(256),
  /** Client connections open at once on the API port; beyond: 503 and closed (idle keep-alives count). */
  maxConnections: num(1, 1_000_000, true).default(1024),
  bodyLimitBytes: num(1024, 256 * 1024 * 1024, true).default(4 * 1024 * 1024),
  maxSnapshotBytes: num(1024, 1024 * 1024 * 1024, true).default(16 * 1024 * 1024),
  /**
   * Hold Linux's PM QoS CPU latency limit at this many µs while the node runs (0: idle CPUs poll
   * instead of halting). Unset: the machine's own setting. See src/server/runtime/cpu-latency-qos.ts.
   */
  cpuLatencyUs: num(0, MAX_CPU_LATENCY_US, true).optional(),
  /** Seconds to let in-flight work finish on SIGTERM. */
  drainSec: num(0, 3600).default(20),
  logLevel: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** sim engine: cost-profile name (see src/engines/sim/profiles.ts). */
  simProfile: z.string().max(64).optional(),
  /** sim engine: multiplies modelled times (e.g. 0.05 makes multi-process tests fast). */
  simTimeScale: num(0, 1000).default(1),
  threads: num(1, 256, true).optional(),
  /** llamacpp engine: KV slots, and saved sequence states (second-level cache); bounds the cache size. */
  slots: num(1, 64, true).optional(),
  savedStates: num(0, 10_000, true).optional(),
  /** llamacpp engine: tokens per slot (prompt + output), i.e. the longest request. */
  slotContext: num(64, 131_072, true).optional(),
});

export type NodeSettings = z.output<typeof nodeSettingsSchema>;
export type SettingKey = keyof NodeSettings;
export const SETTING_KEYS = Object.keys(nodeSettingsSchema.shape) as SettingKey[];

const MAX_CONFIG_BYTES = 1024 * 1024;

export function envName(key: string): string {
  return `PREFIXMESH_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

/** The command-line flag of a setting: `pollMs` → `--poll-ms`. */
export function flagName(key: string): string {
  return `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

function camel(key: string): string {
  return key.replace(/[-_]([a-z])/g, (_m, c: string) => c.toUpperCase());
}

/** Reads and parses the YAML config file (bounded size); unknown keys are an error (typos matter). */
export function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    const st = statSync(path);
    if (st.size > MAX_CONFIG_BYTES) throw new SettingsError(`config file ${path} is larger than 1 MiB`);
    text = readFileSync(path, "utf8");
  } catch (err) {
    if (err instanceof SettingsError) throw err;
    throw new SettingsError(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text, { maxAliasCount: 100 });
  } catch (err) {
    throw new SettingsError(
      `config file ${path} is not valid YAML: ${(err as Error).message.split("\n")[0]}`,
    );
  }
  if (doc == null) return {};
  if (typeof doc !== "object" || Array.isArray(doc))
    throw new SettingsError(`config file ${path} must be a YAML mapping`);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(doc)) {
    const key = camel(k);
    if (!(SETTING_KEYS as string[]).includes(key)) {
      throw new SettingsError(
        `config file ${path}: unknown setting '${k}' (known: ${SETTING_KEYS.join(", ")})`,
      );
    }
    out[key] = v;
  }
  return out;
}

export function readEnv(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of SETTING_KEYS) {
    const v = env[envName(key)];
    if (v !== undefined && v !== "") out[key] = v;
  }
  return out;
}

/**
 * Merges flags > env > file and validates. `flags` holds only options the user actually gave
 * (commander options without defaults), so defaults never shadow the file or the environment.
 */
export function resolveNodeSettings(
  flags: Record<string, unknown>,
  env: NodeJS.ProcessEnv = process.env,
): NodeSettings {
  const configPath = (flags.config as string | undefined) ?? env.PREFIXMESH_CONFIG;
  const file = configPath ? readConfigFile(configPath) : {};
  const fromEnv = readEnv(env);
  const fromFlags: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(flags)) if (v !== undefined && k !== "config") fromFlags[k] = v;
  const merged = { ...file, ...fromEnv, ...fromFlags };
  const r = nodeSettingsSchema.safeParse(merged);
  if (!r.success) {
    const issue = r.error.issues[0];
    const key = String(issue?.path[0] ?? "");
    const source =
      key in fromFlags
        ? flagName(key)
        : key in fromEnv
          ? envName(key)
          : key in file
            ? `${key} in ${configPath}`
            : key;
    if (issue?.code === "invalid_type" && merged[key as keyof typeof merged] === undefined) {
      throw new SettingsError(
        `${flagName(key)} is required (or ${envName(key)}, or '${key}' in the config file)`,
      );
    }
    throw new SettingsError(`${source || "config"}: ${issue?.message}`);
  }
  return r.data;
}

/** `HOST:PORT` → parts (brackets stripped from IPv6). */
export function splitHostPort(s: string): { host: string; port: number } {
  const i = s.lastIndexOf(":");
  return { host: s.slice(0, i).replace(/^\[|\]$/g, ""), port: Number(s.slice(i + 1)) };
}
