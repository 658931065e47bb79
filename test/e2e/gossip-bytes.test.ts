/**
 * Measurement, not a regression test (runs only with PREFIXMESH_GOSSIP_BENCH=1): gossip bytes per node
 * per second on the real peer transport, 16 `prefixmesh node` processes on 127.0.0.1 (sim engine,
 * Δpoll 250 ms), in both gossip modes — idle, then under load. Bytes are the peer bodies the nodes
 * count in prefixmesh_gossip_bytes_total (snapshots on the full mesh; SWIM + Scuttlebutt messages with
 * their address hints under scuttlebutt), sent direction, summed over nodes.
 */
import { describe, expect, it } from "vitest";
import { postCompletion } from "../api-client.js";
import { words } from "./helpers.js";
import { startSimNodes } from "./sim-nodes.js";

const RUN = process.env.PREFIXMESH_GOSSIP_BENCH === "1";
const N = 16;
const WINDOW_MS = Number(process.env.PREFIXMESH_GOSSIP_BENCH_WINDOW_MS ?? 20_000);
/** Requests per second per node in the loaded window (closed loop, one at a time per node). */
const RATE = 2;

async function sentBytes(api: string): Promise<number> {
  const text = await (await fetch(`${api}/metrics`)).text();
  let sum = 0;
  for (const m of text.matchAll(/^prefixmesh_gossip_bytes_total\{([^}]*)\} ([\d.e+]+)$/gm))
    if (m[1]?.includes('direction="out"')) sum += Number(m[2]);
  return sum;
}

async function window(api: string[], load: boolean): Promise<number> {
  const before = await Promise.all(api.map(sentBytes));
  const t0 = performance.now();
  const end = Date.now() + WINDOW_MS;
  const model = ((await (await fetch(`${api[0]}/v1/models`)).json()) as { data: { id: string }[] }).data[0]
    ?.id;
  // Each node's clients ask 8 topics' few-shot prompts: prefixes recur, so estimates change and route.
  const loops = load
    ? api.map(async (url, i) => {
        for (let k = 0; Date.now() < end; k++) {
          const topic = (i * 7 + k) % 8;
          await postCompletion(url, {
            model,
            prompt: `${words(`topic${topic}`, 256)} q${i}.${k}`,
            max_tokens: 4,
          });
          await new Promise((r) => setTimeout(r, 1000 / RATE));
        }
      })
    : [new Promise((r) => setTimeout(r, WINDOW_MS))];
  await Promise.all(loops);
  const after = await Promise.all(api.map(sentBytes));
  const secs = (performance.now() - t0) / 1000;
  const total = after.reduce((a, b, i) => a + b - (before[i] ?? 0), 0);
  return total / N / secs;
}

describe.skipIf(!RUN)(
  "gossip bytes per node per second on the real transport (PREFIXMESH_GOSSIP_BENCH=1)",
  () => {
    for (const mode of ["full", "scuttlebutt"] as const) {
      it(`${N} nodes, gossip ${mode}`, async () => {
        const ids = Array.from({ length: N }, (_, i) => `n${String(i).padStart(2, "0")}`);
        const nodes = await startSimNodes(ids, () => ["--gossip", mode, "--policy", "affinity"]);
        try {
          // Let membership settle (SWIM joins, first full states) before counting.
          await new Promise((r) => setTimeout(r, 10_000));
          const idle = await window(nodes.api, false);
          const loaded = await window(nodes.api, true);
          console.log(
            `[gossip-bytes] N=${N} gossip=${mode} Δpoll=250ms window=${WINDOW_MS}ms: idle ${idle.toFixed(0)} B/node/s, ` +
              `under ${RATE} req/s/node ${loaded.toFixed(0)} B/node/s`,
          );
          expect(idle).toBeGreaterThan(0);
          expect(loaded).toBeGreaterThan(0);
        } finally {
          await nodes.stop();
        }
      }, 300_000);
    }
  },
);
