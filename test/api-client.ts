/** Small clients of a node's OpenAI-compatible API, shared by the in-process and multi-process tests. */

/** POST a completion request body to a node's API (`signal`: to hang up early). */
export function postCompletion(url: string, body: object, signal?: AbortSignal): Promise<Response> {
  return fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
}

/** The id of the model a node serves (the first of `GET /v1/models`). */
export { modelOf } from "../src/bench/replay.js";
