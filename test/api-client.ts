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

/** A streamed completion: the text of its chunks, and any error event it ended with. */
export async function streamCompletion(url: string, body: object): Promise<{ text: string; error?: string }> {
  const sse = await (await postCompletion(url, { ...body, stream: true })).text();
  let text = "";
  let error: string | undefined;
  for (const line of sse.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const ev = JSON.parse(line.slice(6)) as { choices?: { text?: string }[]; error?: { message: string } };
    if (ev.error) error = ev.error.message;
    text += ev.choices?.[0]?.text ?? "";
  }
  return error === undefined ? { text } : { text, error };
}
