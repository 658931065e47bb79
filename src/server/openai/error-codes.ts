/**
 * Every `error.code` the client API can send, with its HTTP status(es): the one list docs/api.md is
 * checked against (test/project/api-doc.test.ts). `errorBody` takes only these, so a new code cannot
 * be sent without being added here first. Most errors carry no code (`null`): their `type` and HTTP
 * status say what happened.
 */
export const API_ERROR_CODES = {
  model_not_found: { status: [404], meaning: "the request names a model this cluster does not serve" },
  context_length_exceeded: {
    status: [400],
    meaning: "the prompt, or prompt + max_tokens, is longer than the model's context",
  },
  max_tokens_exceeded: {
    status: [400],
    meaning: "the request asks for more max_tokens than this node's ceiling (--max-tokens-ceiling)",
  },
  cache_salt_unsupported: {
    status: [400],
    meaning:
      "the request's `cache_salt` (or LoRA adapter) cannot be kept apart by this node's engine (e.g. Ollama): refused rather than share a cache",
  },
  invalid_request_id: { status: [400], meaning: "the `x-request-id` header is malformed" },
  invalid_deadline: {
    status: [400],
    meaning: "the `x-prefixmesh-deadline-ms` header is not a whole number of ms in 1..3600000",
  },
  deadline_unmeetable: {
    status: [429],
    meaning: "no node is expected to answer within the request's deadline (`x-prefixmesh-deadline-ms`)",
  },
  deadline_exceeded: {
    status: [504],
    meaning: "the request's deadline (`x-prefixmesh-deadline-ms`) passed before its answer",
  },
  too_many_connections: {
    status: [503, 429],
    meaning: "the API port's connection bound is reached (503), or this client address's share of it (429)",
  },
} as const satisfies Record<string, { status: readonly number[]; meaning: string }>;

export type ApiErrorCode = keyof typeof API_ERROR_CODES;
