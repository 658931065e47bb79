/** The value shapes settings share: addresses, bounded numbers, booleans, and the engines' defaults. */
import { z } from "zod";
import { DAEMON_NODE_DEFAULTS, nodeConfigSchema } from "../../core/node/config.js";
import { LlamaCppOptionsSchema } from "../../engines/llamacpp/options.js";
import { OpenAIEngineOptionsSchema } from "../../engines/openai/options.js";
import { parseHostPort } from "../../net/host-port.js";

export const hostPort = z.string().superRefine((s, ctx) => {
  const r = parseHostPort(s, true);
  if (typeof r === "string")
    ctx.addIssue({
      code: "custom",
      message: r.startsWith("must") ? `'${s}' ${r}, e.g. 127.0.0.1:8080` : `'${s}': ${r}`,
    });
});

export const num = (min: number, max: number, int = false) => {
  const base = int ? z.coerce.number().int() : z.coerce.number();
  return base.min(min).max(max);
};
export type NodeConfigNumberKey =
  | "concurrency"
  | "forwardTimeoutMs"
  | "forwardAckTimeoutMs"
  | "forwardResends"
  | "downAfterPolls"
  | "spotCheckRate"
  | "recentPrefixMs";
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
export const nodeNum = (key: Exclude<NodeConfigNumberKey, "forwardResends" | "spotCheckRate">) =>
  nodeConfigNumber(key).default(DAEMON_NODE_DEFAULTS[key]);
export const bool = z.union(
  [z.boolean(), z.enum(["true", "false", "1", "0"]).transform((s) => s === "true" || s === "1")],
  { error: "must be true or false (or 1, 0)" },
);

export const L = LlamaCppOptionsSchema.shape;
export const O = OpenAIEngineOptionsSchema.shape;
/** "`4` (the engine's)" from the engine's own default: stated once, in the engine's schema. */
export const engineDefault = (s: z.ZodDefault) => `\`${s.def.defaultValue}\` (the engine's)`;
