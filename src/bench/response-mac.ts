/**
 * What the shared-secret response MAC costs an HTTP forward: the same forward over 127.0.0.1 to a
 * peer server whose node answers at once (an ack, CHUNKS chunks, the result), in shared-secret mode
 * with the MAC and with it switched off at both ends, in interleaved turns so a slow moment falls on
 * both alike. Both ends share this process, so cpu/req is origin and server together.
 * Run: npm run build && node dist/bench/response-mac.js [N] [CHUNKS]
 */

import { hmacAuth } from "../net/transport-auth.js";
import { PeerClient } from "../net/transport-client.js";
import { buildPeerServer } from "../net/transport-server.js";
import { type ForwardMsg, PROTOCOL_VERSION, type ReplyMsg } from "../net/transport-wire.js";

const N = Number(process.argv[2] ?? 2000);
const CHUNKS = Number(process.argv[3] ?? 1);
const WARMUP = 1000;
const TURNS = 10;
const SECRET = Buffer.alloc(32, 7);
const words = Array.from({ length: CHUNKS }, (_, i) => `word${i} `);
const prompt = Array.from({ length: 540 }, (_, i) => `tok${i}`).join(" ");
const tokens = Uint32Array.from({ length: 540 }, (_, i) => i + 1);

async function setup(mac: boolean) {
  const server = buildPeerServer({
    auth: mac ? hmacAuth("B", SECRET) : { ...hmacAuth("B", SECRET), responseSealer: () => undefined },
    handlers: {
      hello: () => ({ id: "B", cluster: "bench", model: "m", protocol: PROTOCOL_VERSION }),
      isKnownPeer: () => true,
      onMessage() {},
      onForward(_from, msg, reply) {
        reply.ack(1);
        setImmediate(() => {
          for (const w of words) reply.chunk(w);
          const result: ReplyMsg = {
            type: "result",
            reqId: msg.reqId,
            attempt: msg.attempt,
            result: {
              text: words.join(""),
              completionTokens: CHUNKS,
              promptTokens: tokens.length,
              cachedTokens: 0,
              prefillMs: 0,
              decodeMs: 0,
              finishReason: "stop",
            },
            timing: { servedBy: "B", queueMs: 0, prefillMs: 0, decodeMs: 0 },
          };
          reply.finish(result);
        });
      },
    },
  });
  const url = await server.listen({ host: "127.0.0.1", port: 0 });
  const auth = mac ? hmacAuth("A", SECRET) : { ...hmacAuth("A", SECRET), responseOpener: () => undefined };
  const client = new PeerClient({ auth, forwardTransport: "http" });
  client.setPeer("B", url);
  return { server, client, ms: [] as number[], cpuMs: 0 };
}

let seq = 0;
const forward = (): ForwardMsg => {
  const id = `A-1-${seq++}`;
  return {
    type: "forward",
    reqId: id,
    attempt: 0,
    hops: 1,
    request: { id, tokens, prompt, maxTokens: CHUNKS },
  };
};

const paths = { without: await setup(false), with: await setup(true) };
type Path = (typeof paths)["with"];
async function run(p: Path, n: number, keep: boolean): Promise<void> {
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await p.client.forward("B", forward(), () => {});
    if (r.type !== "result") throw new Error(`forward failed: ${JSON.stringify(r)}`);
    if (keep) p.ms.push(performance.now() - t0);
  }
  const cpu = process.cpuUsage(cpu0);
  if (keep) p.cpuMs += (cpu.user + cpu.system) / 1000;
}

for (const p of Object.values(paths)) await run(p, WARMUP, false);
for (let t = 0; t < TURNS; t++) {
  const order = t % 2 ? [paths.with, paths.without] : [paths.without, paths.with];
  for (const p of order) await run(p, Math.floor(N / TURNS), true);
}
const q = (a: number[], f: number) =>
  [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(f * a.length))]!;
for (const [name, p] of Object.entries(paths)) {
  const mean = p.ms.reduce((x, y) => x + y, 0) / p.ms.length;
  console.log(
    `${name.padEnd(8)} n=${p.ms.length} chunks=${CHUNKS} p50=${q(p.ms, 0.5).toFixed(3)} ` +
      `p99=${q(p.ms, 0.99).toFixed(3)} mean=${mean.toFixed(3)} ms cpu/req=${(p.cpuMs / p.ms.length).toFixed(3)} ms`,
  );
}
for (const p of Object.values(paths)) {
  await p.client.close();
  await p.server.close();
}
