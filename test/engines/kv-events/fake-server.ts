/**
 * A FAKE OpenAI-compatible server (no inference) with a prefix cache that behaves like vLLM's: it
 * reports as cached the whole blocks of the prompt it holds, short of the prompt's last token, stores
 * the prompt's other whole blocks, and publishes what it stores through the KV-event publisher test
 * double. Prompts arrive as text; `tokenize` turns them into the ids the node routes by.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { KvEventPublisherDouble } from "./publisher-double.js";

export interface FakeServerOptions {
  blockSize: number;
  /** The text's token ids (default: the prompt is the ids, space-separated). */
  tokenize?: (text: string) => number[];
  /** Requests (by arrival, from 0) whose events are lost on the way (buffered for replay only). */
  dropEventsOf?: Set<number>;
}

export interface FakeServer {
  url: string;
  /** Block hashes held, by the tokens of the prefix they end. */
  held: Map<string, number>;
  /** What `GET /health` answers: 200 while true, 503 while false (the server going down). */
  healthy: boolean;
  close(): Promise<void>;
}

export async function fakePrefixCachingServer(
  pub: KvEventPublisherDouble,
  o: FakeServerOptions,
): Promise<FakeServer> {
  const bs = o.blockSize;
  const tokenize = o.tokenize ?? ((t: string) => t.split(" ").map(Number));
  const held = new Map<string, number>();
  let nextHash = 1;
  let requests = 0;
  const server: Server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", async () => {
      if (req.url === "/health") {
        res.writeHead(fake.healthy ? 200 : 503, { "content-type": "application/json" }).end("{}");
        return;
      }
      if (req.url !== "/v1/completions") {
        res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}');
        return;
      }
      const n = requests++;
      const tokens = tokenize(JSON.parse(body).prompt as string);
      const full = Math.floor(tokens.length / bs);
      let hit = 0;
      while (hit < full && held.has(tokens.slice(0, (hit + 1) * bs).join(","))) hit++;
      const cached = Math.min(hit * bs, Math.floor((tokens.length - 1) / bs) * bs);
      const hashes: number[] = [];
      for (let b = hit; b < full; b++) {
        const h = nextHash++;
        held.set(tokens.slice(0, (b + 1) * bs).join(","), h);
        hashes.push(h);
      }
      if (hashes.length > 0) {
        const parent = hit === 0 ? null : held.get(tokens.slice(0, hit * bs).join(","))!;
        await pub.publish(
          [{ type: "BlockStored", hashes, parent, tokens: tokens.slice(hit * bs, full * bs), blockSize: bs }],
          { drop: o.dropEventsOf?.has(n) ?? false },
        );
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify({ choices: [{ text: "ok", finish_reason: "stop" }] })}\n\n`);
      const usage = {
        prompt_tokens: tokens.length,
        completion_tokens: 1,
        prompt_tokens_details: { cached_tokens: cached },
      };
      res.write(`data: ${JSON.stringify({ choices: [], usage })}\n\n`);
      res.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const fake: FakeServer = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held,
    healthy: true,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  return fake;
}
