/**
 * How a setting is documented: what it means, its value's shape (`--flag <value>`), a default stated in
 * words where the schema has none (the engine's own, the CA's…), its section in
 * docs/configuration.md, and `flag: false` for a setting that is never a flag. `--help` and
 * docs/configuration.md are both made from this, so the meaning is written once, beside the schema.
 */
import type { z } from "zod";

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

/** A schema with its documentation attached (the doc is found again by the schema object). */
export function setting<T extends z.ZodType>(schema: T, doc: SettingDoc): T {
  const described = schema.describe(doc.description) as T;
  docs.set(described, doc);
  return described;
}

/** The documentation `setting` attached to a schema, if any. */
export function docOf(schema: z.ZodType): SettingDoc | undefined {
  return docs.get(schema);
}
