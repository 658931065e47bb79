/** Help-text pieces derived from the zod schemas, so a stated default cannot drift from the applied one. */
import { z } from "zod";

/** `(default X)` for a schema with a default; throws if it has none (a help text bug, caught at startup). */
export function defaultNote(schema: z.ZodType): string {
  if (!(schema instanceof z.ZodDefault)) throw new Error("defaultNote: the schema has no default");
  return `(default ${schema.def.defaultValue})`;
}
