/**
 * zod schemas for the OpenAI-compatible request bodies we accept. Unknown fields are ignored (clients
 * send many optional knobs), but fields whose semantics we cannot honour (n or best_of > 1, echo,
 * logprobs, token prompts, tools or functions, a JSON response_format, a non-empty logit_bias) are refused
 * with a clear 400 instead of being silently dropped. Every size is bounded.
 */
import { z } from "zod";
import { MAX_CACHE_SALT } from "../../core/namespace.js";

const MAX_TEXT = 1_000_000;
const stop = z
  .union([z.string().max(256), z.array(z.string().max(256)).max(4)])
  .nullish()
  .transform((s) => (s == null ? undefined : Array.isArray(s) ? s : [s]));

const sampling = {
  model: z.string().min(1).max(256),
  max_tokens: z.number().int().min(1).max(1_000_000).nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  seed: z.number().int().nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  // Token ids are one model's: a mesh may route to another (--mixed-models), and no engine here takes them.
  logit_bias: z
    .record(z.string(), z.unknown())
    .refine((b) => Object.keys(b).length === 0, "logit_bias is not supported")
    .nullish(),
  stop,
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().optional() }).nullish(),
  n: z.literal(1, { message: "only n=1 is supported" }).nullish(),
  user: z.string().max(256).optional(),
  /** vLLM's per-tenant cache salt: requests share cached prefixes only with the same salt. */
  cache_salt: z
    .string({ message: "cache_salt must be a string" })
    .min(1, "cache_salt must not be empty")
    .max(MAX_CACHE_SALT, `cache_salt is at most ${MAX_CACHE_SALT} characters`)
    .nullish(),
};

export const completionRequestSchema = z.looseObject({
  ...sampling,
  prompt: z.union(
    [z.string().max(MAX_TEXT), z.array(z.string().max(MAX_TEXT)).length(1, "send one prompt per request")],
    { message: "prompt must be a string (token-array prompts are not supported)" },
  ),
  echo: z.literal(false, { message: "echo is not supported" }).nullish(),
  logprobs: z.null({ message: "logprobs are not supported" }).optional(),
  suffix: z.null({ message: "suffix is not supported" }).optional(),
  best_of: z.literal(1, { message: "only best_of=1 is supported" }).nullish(),
});
export type CompletionRequest = z.infer<typeof completionRequestSchema>;

const contentPart = z.object({
  type: z.literal("text", { message: "only text content parts are supported (no images, audio or files)" }),
  text: z.string().max(MAX_TEXT),
});
const message = z.object({
  role: z.enum(["system", "user", "assistant", "tool", "developer"]),
  content: z.union([z.string().max(MAX_TEXT), z.array(contentPart).max(256)]).nullish(),
  name: z.string().max(256).optional(),
});

export const chatRequestSchema = z.looseObject({
  ...sampling,
  max_completion_tokens: z.number().int().min(1).max(1_000_000).nullish(),
  messages: z.array(message).min(1).max(4096),
  logprobs: z.literal(false, { message: "logprobs are not supported" }).nullish(),
  tools: z.undefined({ message: "tools are not supported" }).optional(),
  functions: z.undefined({ message: "functions are not supported" }).optional(),
  response_format: z
    .looseObject({ type: z.literal("text", { message: "only text responses are supported (no JSON mode)" }) })
    .nullish(),
});
export type ChatRequest = z.infer<typeof chatRequestSchema>;

export const policySwitchSchema = z.object({ policy: z.string().min(1).max(64) });

/**
 * `POST /tokenize` in the two shapes remote servers use: vLLM/SGLang's `{model?, prompt}` and
 * llama.cpp server's `{content}`. The text's length is bounded by the API's body limit.
 */
export const tokenizeRequestSchema = z
  .object({
    model: z.string().max(512).optional(),
    prompt: z.string().optional(),
    content: z.string().optional(),
  })
  .refine((b) => (b.prompt === undefined) !== (b.content === undefined), {
    message: "give the text as 'prompt' (or 'content'), exactly one of them",
    path: ["prompt"],
  });

/** A short human-readable summary of a zod failure, for the OpenAI error `message`. */
export function describeZodError(err: z.ZodError): { message: string; param: string | null } {
  const first = err.issues[0] && specific(err.issues[0]);
  if (!first) return { message: "invalid request body", param: null };
  const param = first.path.length > 0 ? first.path.join(".") : null;
  // A body that is no JSON object at all (text/plain, a bare string or array): say what is wanted.
  if (param === null && first.code === "invalid_type" && first.expected === "object")
    return { message: "the request body must be a JSON object (content-type: application/json)", param };
  return { message: param ? `${param}: ${first.message}` : first.message, param };
}

/**
 * A union that fits none of its shapes says only "Invalid input" unless it was given a message of its
 * own: tell instead what is wrong in the shape the value came closest to — past its type check (a list
 * too long rather than "no string"), then the deepest (the part of a list that is wrong).
 */
function specific(issue: z.core.$ZodIssue): z.core.$ZodIssue {
  if (issue.code !== "invalid_union" || issue.message !== "Invalid input") return issue;
  let best: z.core.$ZodIssue | undefined;
  const rank = (i: z.core.$ZodIssue) => (i.code === "invalid_type" ? 0 : 1000) + i.path.length;
  for (const option of issue.errors) {
    const i = option[0];
    if (i !== undefined && (best === undefined || rank(i) > rank(best))) best = i;
  }
  return best === undefined ? issue : specific({ ...best, path: [...issue.path, ...best.path] });
}
