#!/usr/bin/env node
// The demo's cold start (issue 17): start `prefixmesh cluster` (4 embedded llama.cpp nodes, the generated
// model), send a new prompt P to A, then P with a different tail to B, C and D; then a new prompt Q to B and
// its variants to C, D and A. It prints, per request, who served it, the hops and the cached tokens, so one
// sees whether a prompt whose prefix a peer holds is forwarded from every entry node. Each request waits
// WAIT_MS first, so the holder's snapshot has reached every peer (a smaller wait measures staleness instead).
// Usage: npm run build && node scripts/demo-cold-start.mjs [extra `prefixmesh cluster` flags]
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

const WAIT_MS = Number(process.env.WAIT_MS ?? 1500);
const child = spawn("node", ["dist/cli/main.js", "cluster", "--nodes", "4", "--json", ...process.argv.slice(2)], {
  stdio: ["ignore", "pipe", "inherit"],
});
const info = JSON.parse(await new Promise((r) => createInterface({ input: child.stdout }).once("line", r)));
const urls = info.nodes.map((n) => n.apiUrl);
const model = (await (await fetch(`${urls[0]}/v1/models`)).json()).data[0].id;
const words = (seed, n) => Array.from({ length: n }, (_, i) => `${seed}${(i * 7919) % 997}`).join(" ");

async function ask(entry, prompt) {
  await new Promise((r) => setTimeout(r, WAIT_MS));
  const t = performance.now();
  const r = await fetch(`${urls[entry]}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt, max_tokens: 1, temperature: 0 }),
  });
  const body = await r.json();
  const u = body.usage ?? {};
  console.log(
    `${"ABCD"[entry]}: ${r.status} served by ${r.headers.get("x-prefixmesh-served-by")}, hops ${r.headers.get("x-prefixmesh-hops")}, ` +
      `cached ${u.prompt_tokens_details?.cached_tokens ?? "?"} of ${u.prompt_tokens ?? "?"}, ${Math.round(performance.now() - t)} ms`,
  );
}

try {
  const P = `Question about history. ${words("p", 250)}`;
  const Q = `Question about physics. ${words("q", 250)}`;
  console.log("P, new, enters A; then its variants enter B, C, D");
  await ask(0, P);
  for (const i of [1, 2, 3]) await ask(i, `${P} tail ${i}`);
  console.log("Q, new, enters B; then its variants enter C, D, A");
  await ask(1, Q);
  for (const i of [2, 3, 0]) await ask(i, `${Q} tail ${i}`);
} finally {
  child.kill("SIGTERM");
}
