/**
 * Node configuration from three sources, highest precedence first: command-line flags, `PREFIXMESH_*`
 * environment variables (e.g. PREFIXMESH_POLL_MS=200), then a YAML file (`--config`, keys in camelCase
 * or kebab-case, e.g. `poll-ms: 200`). Everything is validated with zod; a problem is one clear line
 * naming the setting and where it came from.
 */
import { readFileSync, statSync } from "node:fs";
import { parse as parseYaml } from "yaml";
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
