/**
 * The node's settings schema, one object made of the sections' parts (identity.ts, engine.ts,
 * routing.ts, limits.ts): every setting's type, bounds, default and documentation.
 */
import { z } from "zod";
import { docOf, type SettingDoc } from "./doc.js";
import { engineSettings } from "./engine.js";
import { identitySettings } from "./identity.js";
import { limitsSettings } from "./limits.js";
import { routingSettings } from "./routing.js";

export const nodeSettingsSchema = z.object({
  ...identitySettings,
  ...engineSettings,
  ...routingSettings,
  ...limitsSettings,
});

export type NodeSettings = z.output<typeof nodeSettingsSchema>;
export type SettingKey = keyof NodeSettings;
export const SETTING_KEYS = Object.keys(nodeSettingsSchema.shape) as SettingKey[];

/** A setting's documentation (every key of the schema has one, or this throws: a bug caught at startup). */
export function settingDoc(key: SettingKey): SettingDoc {
  const d = docOf(nodeSettingsSchema.shape[key]);
  if (!d) throw new Error(`setting '${key}' has no documentation`);
  return d;
}

/** A setting's default in the schema, as resolved settings hold it (undefined: it has none). */
export function settingDefaultValue(key: SettingKey): unknown {
  const s = nodeSettingsSchema.shape[key] as z.ZodType;
  return s instanceof z.ZodDefault ? s.def.defaultValue : undefined;
}

/** A setting's default as `--help` and the docs state it (markdown): the schema's own, else its words. */
export function settingDefault(key: SettingKey): string | undefined {
  const value = settingDefaultValue(key);
  if (value !== undefined) return `\`${String(value)}\``;
  return settingDoc(key).defaultText;
}

/** The settings that are flags of `prefixmesh node` (all but the ones documented `flag: false`). */
export function flagSettings(): SettingKey[] {
  return SETTING_KEYS.filter((k) => settingDoc(k).flag !== false);
}
