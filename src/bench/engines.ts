/**
 * Engine benchmark (`npm run bench:engines`): the embedded llama.cpp engine on a generated model.
 * Measures cold vs cached-prefix prefill for 540-token MMLU-shaped prompts (450-token shared 5-shot
 * prefix + 90-token question; token ids, not real MMLU text), decode ms/token, saved-state size and
 * save/load time, KV memory per slot, on 1 and 2 threads; then fits the simulator's cost profile
 *   time = overhead + prefill/uncached token + cached/cached token + decode/output token
 * (overhead from a 2-token prompt, the per-token terms from the 540-token cold and 450-cached runs).
 * Usage: node dist/bench/engines.js [--model generated:bench|<gguf>] [--threads 1,2] [--reps 5]
 */
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { Token } from "node-llama-cpp";
import { resolveModelPath } from "../engines/factory.js";
import { LlamaCppEngine } from "../engines/llamacpp/engine.js";
import { cpuLlama } from "../engines/llamacpp/runtime.js";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: "generated:bench" },
    threads: { type: "string", default: "1,2" },
    reps: { type: "string", default: "5" },
  },
});
const reps = Math.max(1, Number(values.reps));
const threadList = values.threads.split(",").map(Number);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ids = (seed: number, n: number, first?: number) =>
  Array.from({ length: n }, (_, i) =>
    i === 0 && first !== undefined ? first : 300 + ((seed * 7919 + i * 131) % 3500),
  );

async function benchThreads(modelPath: string, threads: number) {
  // One slot, no saved states: every new prefix is cold, a repeated prefix is a pure slot hit.
  const engine = await LlamaCppEngine.create({
    modelPath,
    slots: 1,
    slotContext: 1024,
    threads,
    maxSavedStates: 0,
  });
  const run = (tokens: number[], maxTokens = 1) =>
    engine.run({ id: "b", tokens: Uint32Array.from(tokens), maxTokens });
  await run(ids(999, 64, 1)); // warm-up: graph allocation, first-call costs
  const cold: number[] = [];
  const cached: number[] = [];
  const tiny: number[] = [];
  let seed = 1;
  for (let r = 0; r < reps; r++) {
    const prefix = ids(seed++, 450, 1);
    const a = await run([...prefix, ...ids(seed++, 90)]);
    const b = await run([...prefix, ...ids(seed++, 90)]);
    if (a.cachedTokens > 1 || b.cachedTokens < 450)
      throw new Error(`unexpected cache hits ${a.cachedTokens}/${b.cachedTokens}`);
    cold.push(a.prefillMs);
    cached.push(b.prefillMs);
    // a 2-token cold prompt is almost pure fixed cost (sampling, bookkeeping, one graph launch)
    tiny.push((await run(ids(seed++, 2, 1))).prefillMs);
  }
  const decode: number[] = [];
  for (let r = 0; r < Math.min(reps, 3); r++) {
    const out = await run(ids(seed++, 100, 1), 33);
    if (out.completionTokens > 1) decode.push(out.decodeMs / (out.completionTokens - 1));
  }
  await engine.close();
  // Profile: overhead from the 2-token prompt; per uncached token from the cold 540; per cached
  // token from what the 450-cached run costs beyond overhead + its 90 uncached tokens.
  const overhead = median(tiny);
  const perUncached = (median(cold) - overhead) / 540;
  const perCached = Math.max(0, (median(cached) - overhead - 90 * perUncached) / 450);
  return {
    threads,
    coldMs: median(cold),
    cachedMs: median(cached),
    decodeMsPerToken: decode.length ? median(decode) : Number.NaN,
    overhead,
    perUncached,
    perCached,
  };
}

/** Saved-state size and save/load time for a 450-token prefix, straight through node-llama-cpp. */
async function benchStates(modelPath: string) {
  const llama = await cpuLlama();
  const model = await llama.loadModel({ modelPath });
  const context = await model.createContext({
    sequences: 4,
    contextSize: 1024,
    threads: 1,
    flashAttention: false,
  });
  const seq = context.getSequence();
  const dir = mkdtempSync(join(process.platform === "linux" ? "/dev/shm" : tmpdir(), "pm-bench-"));
  const save: number[] = [];
  const load: number[] = [];
  let bytes = 0;
  for (let r = 0; r < reps; r++) {
    await seq.clearHistory();
    await seq.evaluateWithoutGeneratingNewTokens(ids(100 + r, 450, 1) as Token[]);
    const file = join(dir, `s${r}.bin`);
    let t = performance.now();
    await seq.saveStateToFile(file);
    save.push(performance.now() - t);
    bytes = statSync(file).size;
    await seq.clearHistory();
    t = performance.now();
    await seq.loadStateFromFile(file, { acceptRisk: true });
    load.push(performance.now() - t);
    if (seq.nextTokenIndex !== 450) throw new Error("state did not restore 450 tokens");
  }
  rmSync(dir, { recursive: true, force: true });
  const info = model.fileInsights;
  await context.dispose();
  await model.dispose();
  return { saveMs: median(save), loadMs: median(load), stateBytes: bytes, layers: info.totalLayers };
}

async function main() {
  const modelPath = await resolveModelPath(values.model);
  const sizeMb = statSync(modelPath).size / 1e6;
  // Timings on a shared 2-core machine depend heavily on other load: record it with the numbers.
  const load = () => loadavg()[0]!.toFixed(2);
  console.log(
    `model ${values.model} (${modelPath}, ${sizeMb.toFixed(1)} MB), reps ${reps}, load avg ${load()}`,
  );
  const states = await benchStates(modelPath);
  const rows = [];
  for (const t of threadList) rows.push(await benchThreads(modelPath, t));
  const f = (x: number, d = 1) => x.toFixed(d);
  console.log("\n| threads | cold 540 tok (ms) | 450 cached + 90 new (ms) | speed-up | decode (ms/token) |");
  console.log("|---|---|---|---|---|");
  for (const r of rows) {
    console.log(
      `| ${r.threads} | ${f(r.coldMs)} | ${f(r.cachedMs)} | ${f(r.coldMs / r.cachedMs)}× | ${f(r.decodeMsPerToken, 2)} |`,
    );
  }
  console.log(`load avg at end: ${load()}`);
  const perToken = states.stateBytes / 450;
  console.log(
    `\nsaved state, 450 tokens: ${f(states.stateBytes / 1024, 0)} KiB (${f(perToken / 1024, 1)} KiB/token); ` +
      `save ${f(states.saveMs, 2)} ms, load ${f(states.loadMs, 2)} ms (tmpfs)`,
  );
  console.log(
    `KV memory per slot ≈ ${f(perToken / 1024, 1)} KiB/token → ${f((perToken * 2048) / 2 ** 20, 0)} MiB per 2048-token slot`,
  );
  console.log(
    "\ncpu-llamacpp cost profile (prefill = overhead + a·uncached + b·cached; decode per output token):",
  );
  for (const r of rows) {
    console.log(
      `  threads ${r.threads}: overheadMs ${f(r.overhead)}, prefillMsPerToken ${f(r.perUncached, 3)}, ` +
        `cachedMsPerToken ${f(r.perCached, 4)}, decodeMsPerToken ${f(r.decodeMsPerToken, 2)}`,
    );
  }
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
