/**
 * Node configuration from three sources, highest precedence first: command-line flags, `PREFIXMESH_*`
 * environment variables (e.g. PREFIXMESH_POLL_MS=200), then a YAML file (`--config`, keys in camelCase
 * or kebab-case, e.g. `poll-ms: 200`). Everything is validated with zod; a problem is one clear line
 * naming the setting and where it came from.
 */
import { readFileSync, statSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import type { z } from "zod";
import { type NodeSettings, nodeSettingsSchema, SETTING_KEYS } from "./schema.js";

/** A setting that is missing, malformed or out of bounds: one line naming it and where it came from. */
export class SettingsError extends Error {
  /** A usage error, as the CLI reports it. */
  readonly exitCode = 2;
  constructor(message: string) {
    super(message);
    this.name = "SettingsError";
  }
}

const MAX_CONFIG_BYTES = 1024 * 1024;

/**
 * `PREFIXMESH_*` variables read besides one per setting (docs/configuration.md lists them too). Any
 * other is refused: a misspelt variable would otherwise be ignored without a word.
 */
export const OTHER_ENV = {
  PREFIXMESH_CONFIG: "The YAML config file, as `--config` (the flag wins).",
  PREFIXMESH_CACHE_DIR:
    "Where generated models and tokenized MMLU pools are cached (default `~/.cache/prefixmesh`).",
  PREFIXMESH_EXIT_WITH_PARENT:
    "`1`: the node exits when its standard input closes (set by `prefixmesh cluster` for the nodes it starts).",
  PREFIXMESH_MMLU_DIR: "`npm run bench:core`: the MMLU folder (default `../shared/datasets/mmlu`).",
  PREFIXMESH_GOSSIP_BENCH: "`1`: test/e2e/gossip-bytes.test.ts runs its measurement (skipped otherwise).",
  PREFIXMESH_GOSSIP_BENCH_WINDOW_MS:
    "test/e2e/gossip-bytes.test.ts: the measured window, ms (default 20000).",
  PREFIXMESH_FUZZ_SEED: "test/server/boundary-fuzz.test.ts: added to every property's seed (default 0).",
  PREFIXMESH_FUZZ_RUNS:
    "test/server/boundary-fuzz.test.ts: multiplies every property's run count (default 1).",
  PREFIXMESH_FUZZ_STATS:
    "test/server/boundary-fuzz.test.ts: `1` prints how often each status came back; `2` with error messages.",
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
  // The spelling each setting was given in: `poll-ms` and `pollMs` both name pollMs, and a file that
  // gives both would otherwise keep whichever came last without a word.
  const spelt = new Map<string, string>();
  for (const [k, v] of Object.entries(doc)) {
    const key = camel(k);
    if (!(SETTING_KEYS as string[]).includes(key)) throw new SettingsError(unknownKeyText(path, k));
    const before = spelt.get(key);
    if (before !== undefined)
      throw new SettingsError(`config file ${path}: '${before}' and '${k}' both set ${key}; keep one`);
    spelt.set(key, k);
    out[key] = v;
  }
  return out;
}

/** An unknown YAML key's line: the closest known key in the spelling the file used, when one is near. */
function unknownKeyText(path: string, k: string): string {
  const best = closest(camel(k).toLowerCase(), SETTING_KEYS, (known) => known.toLowerCase());
  const near = best === undefined ? undefined : k.includes("-") ? flagName(best).slice(2) : best;
  const hint = near === undefined ? "" : `; did you mean '${near}'?`;
  const shown = k.length > 200 ? `${k.slice(0, 200)}…` : k;
  return `config file ${path}: unknown setting '${shown}'${hint} (every key: docs/configuration.md)`;
}

/**
 * The known name nearest to `name`, if near (a name far from all would get a random one). A long name
 * is near none, and skipping it keeps a garbled key from costing seconds of edit distances.
 */
function closest(name: string, known: readonly string[], form = (k: string) => k): string | undefined {
  if (name.length > 200) return undefined;
  let best = { name: "", d: Number.POSITIVE_INFINITY };
  for (const k of known) {
    const d = distance(name, form(k));
    if (d < best.d) best = { name: k, d };
  }
  return best.d <= 3 ? best.name : undefined;
}

/** Edit distance, for the closest known name to a misspelt one. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(
        (prev[j] ?? 0) + 1,
        (row[j - 1] ?? 0) + 1,
        (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    prev = row;
  }
  return prev[b.length] ?? 0;
}

/**
 * Kubernetes' service links: every pod gets `<SERVICE>_SERVICE_HOST`, `_SERVICE_PORT[_<name>]`,
 * `_PORT` and `_PORT_<n>_<proto>[_PROTO|_PORT|_ADDR]` for each Service in its namespace, so a Service
 * named `prefixmesh` (deploy/k8s) or `prefixmesh-…` puts such names in every node's environment.
 */
const SERVICE_LINK =
  /^PREFIXMESH(_[A-Z0-9]+)*_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?)$/;

/** Throws on a `PREFIXMESH_*` variable that is neither a setting's nor in OTHER_ENV, naming the closest. */
export function checkEnvNames(env: NodeJS.ProcessEnv): void {
  const known = [...SETTING_KEYS.map(envName), ...Object.keys(OTHER_ENV)];
  for (const name of Object.keys(env).sort()) {
    if (!name.startsWith("PREFIXMESH_") || known.includes(name) || SERVICE_LINK.test(name)) continue;
    const best = closest(name, known);
    const hint = best === undefined ? "" : `; did you mean ${best}?`;
    throw new SettingsError(
      `unknown environment variable ${name}${hint} (PREFIXMESH_ and a setting's name: docs/configuration.md)`,
    );
  }
}

export function readEnv(env: NodeJS.ProcessEnv): Record<string, unknown> {
  checkEnvNames(env);
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
    const raw = issue?.path.length === 1 ? merged[key as keyof typeof merged] : undefined;
    throw new SettingsError(`${source || "config"}: ${issue ? settingIssueText(issue, raw) : "invalid"}`);
  }
  return r.data;
}

/**
 * One validation problem in an operator's words, with the value given (`raw`, when known): zod's own
 * texts ("Invalid input: expected number, received NaN") name neither the value nor what to write.
 */
export function settingIssueText(issue: z.core.$ZodIssue, raw?: unknown): string {
  const got = raw === undefined ? "" : `, got ${typeof raw === "string" ? `'${raw}'` : JSON.stringify(raw)}`;
  switch (issue.code) {
    case "invalid_type":
      if (issue.expected === "number") return `must be a number${got}`;
      if (issue.expected === "int") return `must be a whole number${got}`;
      break;
    case "too_small":
      if (issue.origin === "number") return `must be ${issue.inclusive ? "≥" : ">"} ${issue.minimum}${got}`;
      break;
    case "too_big":
      if (issue.origin === "number") return `must be ${issue.inclusive ? "≤" : "<"} ${issue.maximum}${got}`;
      break;
    case "invalid_value":
      return `must be one of ${issue.values.map(String).join(", ")}${got}`;
    default:
      break;
  }
  return raw === undefined || issue.message.includes(String(raw)) ? issue.message : `${issue.message}${got}`;
}

/** `HOST:PORT` → parts (brackets stripped from IPv6). */
export function splitHostPort(s: string): { host: string; port: number } {
  const i = s.lastIndexOf(":");
  return { host: s.slice(0, i).replace(/^\[|\]$/g, ""), port: Number(s.slice(i + 1)) };
}
