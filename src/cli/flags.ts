/** Flag values checked by the settings' own schemas, so a bound is stated once and a typo is a usage error. */
import type { z } from "zod";
import {
  flagName,
  type NodeSettings,
  nodeSettingsSchema,
  type SettingKey,
  settingIssueText,
} from "../server/settings/index.js";
import { CliError } from "./errors.js";

/** `value` (given on the command line as flag `key`) checked by `schema`; a usage error names the flag. */
export function parseFlag<T>(schema: z.ZodType<T>, key: string, value: unknown, shown = value): T {
  const r = schema.safeParse(value);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw new CliError(`${flagName(key)}: ${issue ? settingIssueText(issue, String(shown)) : "invalid"}`);
  }
  return r.data;
}

/**
 * Validates one setting given as a flag value elsewhere (e.g. `prefixmesh cluster` passing it on to
 * its nodes), against the same schema the node applies: the bounds are stated once.
 */
export function parseSetting<K extends SettingKey>(key: K, raw: string): NodeSettings[K] {
  return parseFlag(nodeSettingsSchema.shape[key] as z.ZodType, key, raw) as NodeSettings[K];
}
