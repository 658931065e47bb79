/**
 * Server-sent events parsing for streamed completions: yields each `data:` payload, stops at
 * `[DONE]`. Line and event sizes are bounded because the peer controls them.
 */
export const MAX_SSE_EVENT_BYTES = 1 << 20;

export async function* sseData(body: AsyncIterable<Buffer | string>): AsyncGenerator<string> {
  let buf = "";
  let data: string[] = [];
  // An event's data lines are bounded together, not only the unparsed buffer: a server sending
  // endless `data:` lines without the blank line that ends the event must not grow memory.
  let dataChars = 0;
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
          dataChars = 0;
          if (payload.trim() === "[DONE]") return;
          yield payload;
        }
      } else if (line.startsWith("data:")) {
        const d = line.slice(5).replace(/^ /, "");
        dataChars += d.length + 1;
        if (dataChars > MAX_SSE_EVENT_BYTES)
          throw new Error(`SSE event larger than ${MAX_SSE_EVENT_BYTES} bytes`);
        data.push(d);
      }
      // other fields (event:, id:, retry:, comments) carry nothing we use
      nl = buf.indexOf("\n");
    }
  }
  const last = data.join("\n");
  if (data.length > 0 && last.trim() !== "[DONE]") yield last;
}
