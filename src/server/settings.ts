/**
 * Node configuration from three sources, highest precedence first: command-line flags, `PREFIXMESH_*`
 * environment variables (e.g. PREFIXMESH_POLL_MS=200), then a YAML file (`--config`, keys in camelCase
 * or kebab-case, e.g. `poll-ms: 200`). Everything is validated with zod; a problem is one clear line
 * naming the setting and where it came from.
 */
import { readFileSync, statSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { DAEMON_NODE_DEFAULTS, nodeConfigSchema } from "../core/node/config.js";
import { POLICY_NAMES } from "../core/node/policies/index.js";
import { zmqEndpointSchema } from "../engines/kv-events/options.js";
import { LlamaCppOptionsSchema } from "../engines/llamacpp/options.js";
import {
  MAX_CONTEXT_TOKENS,
  OpenAIEngineOptionsSchema,
  TOKENIZER_CHOICES,
} from "../engines/openai/options.js";
import { DEFAULT_PROFILE, PROFILE_NAMES } from "../engines/sim/profiles.js";
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
/** The same with the daemon's default (DAEMON_NODE_DEFAULTS). */
const nodeNum = (key: Exclude<NodeConfigNumberKey, "forwardResends">) =>
  nodeConfigNumber(key).default(DAEMON_NODE_DEFAULTS[key]);
const bool = z.union([
  z.boolean(),
  z.enum(["true", "false", "1", "0"]).transform((s) => s === "true" || s === "1"),
]);

/**
 * How a setting is documented: what it means, its value's shape (`--flag <value>`), a default stated in
 * words where the schema has none (the engine's own, the CA's…), its section in
 * docs/configuration.md, and `flag: false` for a setting that is never a flag. `--help` and
 * docs/configuration.md are both made from this, so the meaning is written once, here.
 */
export interface SettingDoc {
  description: string;
  section: SettingSection;
  value?: string;
  defaultText?: string;
  flag?: false;
}
export const SETTING_SECTIONS = [
  "Identity and addresses",
  "Membership",
  "Engine",
  "Routing and forwarding",
  "Peer security",
  "Limits",
  "Operations",
  "Experiments",
] as const;
export type SettingSection = (typeof SETTING_SECTIONS)[number];

const docs = new WeakMap<z.ZodType, SettingDoc>();
function setting<T extends z.ZodType>(schema: T, doc: SettingDoc): T {
  const described = schema.describe(doc.description) as T;
  docs.set(described, doc);
  return described;
}
/** A setting's documentation (every key of the schema has one, or this throws: a bug caught at startup). */
export function settingDoc(key: SettingKey): SettingDoc {
  const d = docs.get(nodeSettingsSchema.shape[key]);
  if (!d) throw new Error(`setting '${key}' has no documentation`);
  return d;
}

/** A setting's default as `--help` and the docs state it (markdown): the schema's own, else its words. */
export function settingDefault(key: SettingKey): string | undefined {
  const s = nodeSettingsSchema.shape[key] as z.ZodType;
  if (s instanceof z.ZodDefault) return `\`${String(s.def.defaultValue)}\``;
  return settingDoc(key).defaultText;
}

/** The settings that are flags of `prefixmesh node` (all but the ones documented `flag: false`). */
export function flagSettings(): SettingKey[] {
  return SETTING_KEYS.filter((k) => settingDoc(k).flag !== false);
}

const L = LlamaCppOptionsSchema.shape;
const O = OpenAIEngineOptionsSchema.shape;
/** "`4` (the engine's)" from the engine's own default: stated once, in the engine's schema. */
const engineDefault = (s: z.ZodDefault) => `\`${s.def.defaultValue}\` (the engine's)`;

export const nodeSettingsSchema = z.object({
  id: setting(nodeIdSchema, {
    section: "Identity and addresses",
    value: "id",
    description:
      "This node's id, unique in the cluster. With mutual TLS it must be the id its certificate was issued for.",
  }),
  listen: setting(hostPort.default("127.0.0.1:8080"), {
    section: "Identity and addresses",
    value: "host:port",
    description:
      "Client API address: the OpenAI-compatible API, /health, /ready, /metrics, /cluster and /dashboard. " +
      "Bind 0.0.0.0:PORT to serve other machines.",
  }),
  peerListen: setting(hostPort.default("127.0.0.1:9080"), {
    section: "Identity and addresses",
    value: "host:port",
    description:
      "Peer port address: anti-entropy snapshots and forwarded requests from the other nodes, authenticated " +
      "(mutual TLS or shared secret). Other nodes must reach it.",
  }),
  peers: setting(
    z.union([z.string().max(65536), z.array(z.unknown()), z.record(z.string(), z.string())]).optional(),
    {
      section: "Membership",
      value: "list",
      description:
        "Static peers, each an id and its peer-port URL: `B=https://10.0.0.2:9080,C=https://10.0.0.3:9080` " +
        "(https with --tls-dir, http otherwise). In YAML also a list of `{id, url}` or a map id → url.",
    },
  ),
  peersDns: setting(z.string().max(300).optional(), {
    section: "Membership",
    value: "name[:port]",
    description:
      "Peers from DNS: every A/AAAA record of the name is a peer (e.g. a Kubernetes headless Service); " +
      "each is asked its id with a hello before it joins. Port: this node's own peer port.",
  }),
  peersDnsIntervalMs: setting(num(100, 3_600_000, true).default(10_000), {
    section: "Membership",
    value: "ms",
    description: "How often the --peers-dns name is re-resolved and DNS-found peers re-checked, in ms.",
  }),
  peersDnsFile: setting(z.string().min(1).max(4096).optional(), {
    section: "Membership",
    value: "file",
    description:
      'Answer --peers-dns look-ups from this JSON file (`{"name": ["10.0.0.7", …]}`), re-read each round, ' +
      "instead of DNS: for tests and for environments that publish peer addresses as a file.",
  }),
  maxPeers: setting(num(1, 256, true).default(256), {
    section: "Membership",
    value: "n",
    description: "Most peers at once, static and DNS-found together; DNS-found ones beyond it are refused.",
  }),
  engine: setting(z.enum(["llamacpp", "openai", "sim"]).default("llamacpp"), {
    section: "Engine",
    value: "kind",
    description:
      "The inference engine: `llamacpp` (embedded llama.cpp, CPU build), `openai` (a remote " +
      "OpenAI-compatible server: llama-server, vLLM, SGLang, Ollama) or `sim` (the simulator's cost model).",
  }),
  model: setting(z.string().min(1).max(4096).default("generated"), {
    section: "Engine",
    value: "path|generated|name",
    description:
      "llamacpp: a GGUF file, or `generated` for the built-in generated model (made once, cached in " +
      "$PREFIXMESH_CACHE_DIR or ~/.cache/prefixmesh). openai: the remote server's model name. " +
      "Every node of a cluster must serve the same model.",
  }),
  engineUrl: setting(z.string().url().max(2048).optional(), {
    section: "Engine",
    value: "url",
    description:
      "openai engine: the remote server's URL, with or without a trailing `/v1` (e.g. `http://127.0.0.1:8000`); " +
      "the node calls its /v1/completions, /tokenize and /health.",
  }),
  engineTokenizer: setting(
    z.enum(TOKENIZER_CHOICES, { error: `must be one of ${TOKENIZER_CHOICES.join(", ")}` }).optional(),
    {
      section: "Engine",
      value: "kind",
      defaultText: engineDefault(O.tokenizer),
      description:
        "openai engine: how prompts are tokenized — `server` (the server's /tokenize), `local` (gpt-tokenizer: " +
        "right only for a matching model), or `auto` (the server's when it has one, else local).",
    },
  ),
  engineContextTokens: setting(num(1, MAX_CONTEXT_TOKENS, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: engineDefault(O.maxContextTokens),
    description:
      "openai engine: tokens per request (prompt + output) when the server reports no limit; the server's own " +
      "(vLLM/SGLang `max_model_len`, llama.cpp's `n_ctx` per slot) wins when it does.",
  }),
  engineApiKey: setting(z.string().max(4096).optional(), {
    section: "Engine",
    flag: false,
    description:
      "openai engine: the remote server's API key, sent as a bearer token. Never a flag (a command line is " +
      "visible to every user of the machine): set the variable or the YAML key.",
  }),
  engineKvEvents: setting(zmqEndpointSchema.optional(), {
    section: "Engine",
    value: "tcp://host:port",
    description:
      "openai engine, vLLM or SGLang: the server's KV-event PUB endpoint (its `--kv-events-config` endpoint), " +
      "so the node mirrors the server's cache exactly instead of modelling it (docs/engines.md).",
  }),
  engineKvReplay: setting(zmqEndpointSchema.optional(), {
    section: "Engine",
    value: "tcp://host:port",
    description:
      "The server's KV-event replay endpoint (`replay_endpoint`): lost batches are recovered from it.",
  }),
  engineKvTopic: setting(z.string().max(256).optional(), {
    section: "Engine",
    value: "topic",
    defaultText: '`""` (every topic)',
    description: "The server's KV-event topic (`topic` in its `--kv-events-config`).",
  }),
  engineKvRank: setting(num(0, 65_535, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: "`0`",
    description:
      "The data-parallel rank this node follows: one node per rank, its stream on the endpoint's port + rank.",
  }),
  policy: setting(z.enum(POLICY_NAMES).default(DEFAULT_POLICY), {
    section: "Routing and forwarding",
    value: "name",
    description:
      "Routing policy. `cost-aware` forwards only when the prefill a peer saves exceeds the round trip and " +
      "its queue; `affinity` is the paper's Algorithm 1 (longest estimated prefix match, ties to self); " +
      "`local` never forwards; `round-robin`, `random`, `least-loaded` and `affinity-argmax` are baselines.",
  }),
  pollMs: setting(num(1, 3_600_000).default(500), {
    section: "Routing and forwarding",
    value: "ms",
    description:
      "Δpoll, the anti-entropy period: every Δpoll each node sends its snapshot to every peer (also the " +
      "heartbeat: a peer silent for 3 periods is suspected). Lower: fresher estimates, more gossip.",
  }),
  clusterId: setting(
    z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, "a cluster id is 1-64 characters from A-Z a-z 0-9 _ . -")
      .optional(),
    {
      section: "Peer security",
      value: "id",
      defaultText: "`prefixmesh` (mutual TLS: the CA's)",
      description:
        "The cluster's name, checked in every peer hello: nodes of another cluster are refused. With mutual " +
        "TLS it is read from the cluster CA and this setting is not used.",
    },
  ),
  tlsDir: setting(z.string().min(1).max(4096).optional(), {
    section: "Peer security",
    value: "dir",
    description:
      "Mutual TLS: a directory holding `ca.crt` and this node's `node-<id>.crt` and `node-<id>.key` " +
      "(`prefixmesh certs init`, then `certs issue --id <id>`). Peers are then `https://` URLs.",
  }),
  secretFile: setting(z.string().min(1).max(4096).optional(), {
    section: "Peer security",
    value: "file",
    description:
      "Shared-secret mode: peer messages are signed with HMAC-SHA256 under this file's secret " +
      "(`prefixmesh certs secret --out FILE`), the same file on every node. For trusted LANs: not encrypted.",
  }),
  insecure: setting(bool.default(false), {
    section: "Peer security",
    description:
      "Allow unauthenticated peer traffic. A node with peers and neither --tls-dir nor --secret-file refuses " +
      "to start without it. Trusted networks only.",
  }),
  injectDelayMs: setting(num(0, 60_000).default(0), {
    section: "Experiments",
    value: "ms",
    description: "Delay added to every peer message, in ms (experiments: emulate a slower network).",
  }),
  injectJitterMs: setting(num(0, 60_000).default(0), {
    section: "Experiments",
    value: "ms",
    description: "Plus a uniform random jitter up to this, in ms.",
  }),
  capacityTokens: setting(num(1, 1e9, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: "the engine's",
    description: "KV capacity in tokens that the node's radix tree models (and peers' estimates assume).",
  }),
  concurrency: setting(nodeNum("concurrency"), {
    section: "Routing and forwarding",
    value: "n",
    description: "Requests the engine runs at once; 1 is the paper's batching-free setting.",
  }),
  forwardTimeoutMs: setting(nodeNum("forwardTimeoutMs"), {
    section: "Routing and forwarding",
    value: "ms",
    description:
      "Give up on a forward attempt after this long, in ms; the request then goes to the next-best node, " +
      "finally this one.",
  }),
  forwardAckTimeoutMs: setting(nodeNum("forwardAckTimeoutMs"), {
    section: "Routing and forwarding",
    value: "ms",
    description:
      "Fall back when a forward is not acknowledged in max(this, 4 × the peer's RTT), in ms. Over TCP " +
      "nothing is lost silently, so the ack only guards against a frozen or black-holed peer; too low, and a " +
      "busy machine's slow acks become spurious fallbacks (work done twice).",
  }),
  forwardTransport: setting(z.enum(["channel", "http"]).default("channel"), {
    section: "Routing and forwarding",
    value: "kind",
    description:
      "How forwards travel: `channel`, multiplexed on one WebSocket per peer upgraded on the peer port; " +
      "`http`, one HTTP request per forward.",
  }),
  maxPending: setting(num(1, 100_000, true).default(256), {
    section: "Limits",
    value: "n",
    description: "Client requests admitted at once; beyond it the API answers 429.",
  }),
  maxConnections: setting(num(1, 1_000_000, true).default(1024), {
    section: "Limits",
    value: "n",
    description:
      "Client connections open at once on the API port (idle keep-alives count); beyond it a connection " +
      "gets 503 and is closed.",
  }),
  maxConnectionsPerAddress: setting(num(1, 1_000_000, true).optional(), {
    section: "Limits",
    value: "n",
    defaultText: "an eighth of `--max-connections` (at least 1)",
    description:
      "Of the API port's connections, those open at once from one client address (an IPv6 client counts " +
      "by its /64, an IPv4-mapped address as the IPv4 one); beyond it a connection gets 429 and is closed, " +
      "so one client cannot lock the others out. Raise it for a proxy or load balancer that carries many " +
      "clients on its own address.",
  }),
  maxPeerConnectionsPerAddress: setting(num(1, 100_000, true).default(64), {
    section: "Limits",
    value: "n",
    description:
      "Peer port connections open at once from one address that have not yet carried a member's " +
      "authenticated request (a member's connections then count only against the port's total, which " +
      "allows every peer its pool and forward channels, however many share a NAT address).",
  }),
  connectionIdleTimeoutMs: setting(num(100, 3_600_000, true).default(10_000), {
    section: "Limits",
    value: "ms",
    description: "Both ports: a connection that has sent nothing at all is closed after this, in ms.",
  }),
  headersTimeoutMs: setting(num(100, 3_600_000, true).default(20_000), {
    section: "Limits",
    value: "ms",
    description:
      "Both ports: a request's headers must be complete this long after the connection opened (or the " +
      "request started, on a kept-alive connection), in ms; else 408 and the connection is closed. Also " +
      "bounds a TLS handshake on the peer port.",
  }),
  requestTimeoutMs: setting(num(1000, 3_600_000, true).default(120_000), {
    section: "Limits",
    value: "ms",
    description:
      "Both ports: a whole request, body included, must arrive within this, in ms (at least " +
      "`--headers-timeout-ms`); else 408. The answer may take as long as it needs.",
  }),
  keepAliveTimeoutMs: setting(num(100, 3_600_000, true).default(72_000), {
    section: "Limits",
    value: "ms",
    description:
      "API port: an idle kept-alive client connection is closed after this, in ms (keep it above a load " +
      "balancer's idle timeout). The peer port keeps its own, above the peers' pools'.",
  }),
  bodyLimitBytes: setting(num(1024, 256 * 1024 * 1024, true).default(4 * 1024 * 1024), {
    section: "Limits",
    value: "bytes",
    description: "Largest client request body on the API port; a larger one gets 413.",
  }),
  maxSnapshotBytes: setting(num(1024, 1024 * 1024 * 1024, true).default(16 * 1024 * 1024), {
    section: "Limits",
    value: "bytes",
    description:
      "Largest anti-entropy snapshot accepted from a peer, as sent and as decoded; a larger one is refused. " +
      "Raise it only for very large caches (a snapshot grows with the radix tree).",
  }),
  cpuLatencyUs: setting(num(0, MAX_CPU_LATENCY_US, true).optional(), {
    section: "Operations",
    value: "µs",
    defaultText: "the machine's own",
    description:
      "Linux: hold the PM QoS CPU latency limit at this many µs while the node runs (0: idle CPUs poll " +
      "instead of halting: faster wake-ups on VMs, idle CPU time burnt). Needs write access to " +
      "/dev/cpu_dma_latency.",
  }),
  drainSec: setting(num(0, 3600).default(20), {
    section: "Operations",
    value: "s",
    description:
      "On SIGTERM, stop taking requests and let in-flight work finish for up to this many seconds.",
  }),
  logLevel: setting(z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"), {
    section: "Operations",
    value: "level",
    description: "Log level of the node's JSON log lines (pino, on stdout).",
  }),
  simProfile: setting(z.string().max(64).optional(), {
    section: "Engine",
    value: "name",
    defaultText: `\`${DEFAULT_PROFILE}\``,
    description: `sim engine: the cost profile (${PROFILE_NAMES.map((p) => `\`${p}\``).join(", ")}).`,
  }),
  simTimeScale: setting(num(0, 1000).default(1), {
    section: "Engine",
    value: "x",
    description: "sim engine: multiplies the modelled times (e.g. 0.05 makes multi-process tests fast).",
  }),
  threads: setting(num(1, 256, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: engineDefault(L.threads),
    description: "llamacpp engine: CPU threads (1 holds up best when several nodes share a machine).",
  }),
  slots: setting(num(1, 64, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: engineDefault(L.slots),
    description: "llamacpp engine: KV slots, i.e. prompts whose KV cache stays live at once.",
  }),
  savedStates: setting(num(0, 10_000, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: engineDefault(L.maxSavedStates),
    description:
      "llamacpp engine: saved sequence states kept, the second-level prefix cache (in /dev/shm when present).",
  }),
  slotContext: setting(num(64, 131_072, true).optional(), {
    section: "Engine",
    value: "n",
    defaultText: engineDefault(L.slotContext),
    description:
      "llamacpp engine: tokens per slot (prompt + output), the longest request; a longer one gets 400 " +
      "context_length_exceeded. Memory grows with slots × this.",
  }),
});

export type NodeSettings = z.output<typeof nodeSettingsSchema>;
export type SettingKey = keyof NodeSettings;
export const SETTING_KEYS = Object.keys(nodeSettingsSchema.shape) as SettingKey[];

const MAX_CONFIG_BYTES = 1024 * 1024;

/** Variables the node reads besides one per setting (docs/configuration.md lists them too). */
export const OTHER_ENV = {
  PREFIXMESH_CONFIG: "The YAML config file, as `--config` (the flag wins).",
  PREFIXMESH_CACHE_DIR:
    "Where generated models and tokenized MMLU pools are cached (default `~/.cache/prefixmesh`).",
} as const;

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
