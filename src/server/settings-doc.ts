/**
 * docs/configuration.md, made from the settings schema (src/server/settings.ts): each setting's YAML
 * key, flag, variable, default, allowed values and meaning. `npm run docs:config` writes it; a test
 * fails when the committed file and this output differ, so the reference cannot drift from the code.
 */
import { z } from "zod";
import {
  envName,
  flagName,
  nodeSettingsSchema,
  OTHER_ENV,
  SETTING_KEYS,
  SETTING_SECTIONS,
  type SettingKey,
  settingDefault,
  settingDoc,
} from "./settings/index.js";

/** Where the generated reference lives, from the repository root. */
export const CONFIGURATION_DOC = "docs/configuration.md";

/** The schema under defaults, optionals and coercing pipes: the type whose bounds a value must meet. */
function core(schema: z.ZodType): z.ZodType {
  let s = schema;
  for (;;) {
    if (s instanceof z.ZodDefault || s instanceof z.ZodOptional) s = s.def.innerType as z.ZodType;
    else if (s instanceof z.ZodPipe) s = s.def.out as z.ZodType;
    else return s;
  }
}

/** The values a setting accepts, in words: bounds for numbers, the choices of an enum, and so on. */
export function allowedValues(key: SettingKey): string {
  const s = core(nodeSettingsSchema.shape[key] as z.ZodType);
  const doc = settingDoc(key);
  if (s instanceof z.ZodNumber) {
    const kind = s.isInt ? "integer" : "number";
    const bounds: string[] = [];
    for (const c of s.def.checks ?? []) {
      const d = c._zod.def as { check: string; value?: number; inclusive?: boolean };
      if (d.check === "greater_than") bounds.push(`${d.inclusive ? "≥" : ">"} ${d.value}`);
      if (d.check === "less_than") bounds.push(`${d.inclusive ? "≤" : "<"} ${d.value}`);
    }
    return bounds.length === 0 ? kind : `${kind} ${bounds.join(", ")}`;
  }
  if (s instanceof z.ZodEnum) return s.options.map((o) => `\`${String(o)}\``).join(", ");
  if (s instanceof z.ZodUnion) {
    const options = s.def.options as z.ZodType[];
    if (options.some((o) => o instanceof z.ZodBoolean)) return "`true`, `false` (also `1`, `0`)";
    // What YAML may give besides the string: only the shapes the union takes.
    const shapes = [
      options.some((o) => o instanceof z.ZodArray) ? "a list" : undefined,
      options.some((o) => o instanceof z.ZodRecord) ? "a map" : undefined,
    ].filter((x) => x !== undefined);
    const also = shapes.length === 0 ? "" : ` (YAML: also ${shapes.join(" or ")})`;
    return `\`${doc.value ?? "value"}\`${also}`;
  }
  if (s instanceof z.ZodString) {
    const max = s.maxLength;
    // Ids (node, cluster) are checked by a pattern whose message says what it allows.
    const pattern = s.def.checks?.find((c) => (c._zod.def as { format?: string }).format === "regex");
    const message = (pattern?._zod.def as { error?: () => string } | undefined)?.error?.();
    const shape = doc.value === "id" ? (message ?? "an id") : `\`${doc.value ?? "string"}\``;
    return max === null ? shape : `${shape}, at most ${max} characters`;
  }
  throw new Error(`settings-doc: no description of the values of '${key}' (${s.def.type})`);
}

const cell = (s: string) => s.replace(/\|/g, "\\|").replace(/\n/g, " ");

function table(keys: SettingKey[]): string[] {
  const rows = [
    "| Setting (YAML key) | Flag | Variable | Default | Allowed | Meaning |",
    "| --- | --- | --- | --- | --- | --- |",
  ];
  for (const key of keys) {
    const doc = settingDoc(key);
    const def = settingDefault(key);
    const flag = doc.flag === false ? "—" : `\`${flagName(key)}\``;
    const required = !(nodeSettingsSchema.shape[key] as z.ZodType).safeParse(undefined).success;
    rows.push(
      `| \`${key}\` | ${flag} | \`${envName(key)}\` | ${required ? "required" : (def ?? "unset")} | ${cell(allowedValues(key))} | ${cell(doc.description)} |`,
    );
  }
  return rows;
}

/** The whole of docs/configuration.md. */
export function renderConfigurationDoc(): string {
  const out: string[] = [
    "# Configuration reference",
    "",
    "<!-- Generated from src/server/settings.ts by `npm run docs:config`: edit the schema, not this file",
    "     (test/server/settings-doc.test.ts fails when the two differ). -->",
    "",
    "Every setting of `prefixmesh node` comes from one of three sources; the first that gives it wins:",
    "",
    "1. a command-line flag (`--poll-ms 200`);",
    "2. an environment variable, `PREFIXMESH_` and the setting's name in upper snake case (`PREFIXMESH_POLL_MS=200`);",
    "3. a YAML file named by `--config FILE` (or `PREFIXMESH_CONFIG`), keys in camelCase or kebab-case (`pollMs: 200` or `poll-ms: 200`).",
    "",
    "Everything is checked before the node starts: an unknown YAML key, an unknown `PREFIXMESH_*` variable",
    "(neither a setting's nor one of the other variables below), a value out of bounds or a missing required",
    "setting stops it with one line naming the setting and where it came from (exit code 2).",
    "Unset means the setting is off, or the default named in its row applies.",
    "",
    "```yaml",
    "# node-a.yaml: prefixmesh node --config node-a.yaml",
    "id: A",
    "listen: 0.0.0.0:8080",
    "peer-listen: 0.0.0.0:9080",
    "peers: B=https://10.0.0.2:9080,C=https://10.0.0.3:9080",
    "tls-dir: /etc/prefixmesh/tls",
    "engine: llamacpp",
    "model: /var/lib/prefixmesh/model.gguf",
    "```",
    "",
  ];
  const seen = new Set<SettingKey>();
  for (const section of SETTING_SECTIONS) {
    const keys = SETTING_KEYS.filter((k) => settingDoc(k).section === section);
    if (keys.length === 0) continue;
    for (const k of keys) seen.add(k);
    out.push(`## ${section}`, "", ...table(keys), "");
  }
  const missing = SETTING_KEYS.filter((k) => !seen.has(k));
  if (missing.length > 0) throw new Error(`settings-doc: settings in no section: ${missing.join(", ")}`);
  out.push("## Other environment variables", "", "| Variable | Meaning |", "| --- | --- |");
  for (const [name, meaning] of Object.entries(OTHER_ENV)) out.push(`| \`${name}\` | ${cell(meaning)} |`);
  out.push("");
  return out.join("\n");
}
