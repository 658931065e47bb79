/**
 * Server-sent events parsing for streamed completions: yields each `data:` payload, stops at
 * `[DONE]`. Line and event sizes are bounded because the peer controls them.
 */
export const MAX_SSE_EVENT_BYTES = 1 << 20;

export async function* sseData(body: AsyncIterable<Buffer | string>): AsyncGenerator<string> {
  let buf = "";
  let data: string[] = [];
  for await (const chunk of body) {
    buf += typeof chunk === "string" ? chunk : chunk.toString("utf8");
    if (buf.length > MAX_SSE_EVENT_BYTES)
      throw new Error(`SSE event larger than ${MAX_SSE_EVENT_BYTES} bytes`);
    let nl = buf.indexOf("\n");
    while (nl >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (data.length > 0) {
          const payload = data.join("\n");
          data = [];
          if (payload.trim() === "[DONE]") return;
          yield payload;
        }
      } else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      // other fields (event:, id:, retry:, comments) carry nothing we use
      nl = buf.indexOf("\n");
    }
  }
  if (data.length > 0 && data.join("\n").trim() !== "[DONE]") yield data.join("\n");
}
