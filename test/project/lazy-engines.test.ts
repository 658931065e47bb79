import { existsSync, readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";

/**
 * A node loads only the engine it runs: node-llama-cpp and gpt-tokenizer's tables are reached from the
 * daemon only through dynamic `import()` (gpt-tokenizer's alone cost a sim node ≈ 20 MB of heap and
 * 0.3 s of start-up, BENCHMARKS.md), and a remote engine's node loads gpt-tokenizer only when it
 * tokenizes locally (its server has no /tokenize, or `--tokenizer local`).
 * The command line loads the experiments' and the simulator's runs, and the report drawing, only in
 * the commands that run them: a `prefixmesh node` that loaded them all started in ≈ 0.73 s with 32 MB
 * of old-generation heap, against ≈ 0.52 s and 23 MB (BENCHMARKS.md).
 * Checked on the static import graph from the daemon's entry points.
 */
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const HEAVY = ["node-llama-cpp", "gpt-tokenizer"];
/** What the experiments draw their figures with: no daemon needs it. */
const REPORTS = ["vega", "vega-lite", "@resvg/resvg-js"];

/** Modules a file loads when it loads: value imports and re-exports (type-only ones are erased). */
function staticImports(src: string): string[] {
  const out: string[] = [];
  const code = src.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "");
  for (const m of code.matchAll(/^\s*(import|export)\s+([\s\S]*?)\s+from\s+"([^"]+)"/gm)) {
    const clause = (m[2] as string).trim();
    if (clause.startsWith("type ")) continue;
    const braces = /^\{([\s\S]*)\}$/.exec(clause);
    if (braces) {
      const names = (braces[1] as string)
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      if (names.length > 0 && names.every((n) => n.startsWith("type "))) continue;
    }
    out.push(m[3] as string);
  }
  for (const m of code.matchAll(/^\s*import\s+"([^"]+)"/gm)) out.push(m[1] as string);
  return out;
}

/** Every package a file pulls in statically, transitively through our own modules: package → via. */
function staticPackages(entry: string): Map<string, string> {
  const seen = new Set<string>();
  const packages = new Map<string, string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const spec of staticImports(readFileSync(file, "utf8"))) {
      if (spec.startsWith(".")) {
        const target = resolve(dirname(file), spec).replace(/\.js$/, ".ts");
        if (existsSync(target)) visit(target);
      } else if (!spec.startsWith("node:")) {
        const pkg = spec.startsWith("@")
          ? spec.split("/").slice(0, 2).join("/")
          : (spec.split("/")[0] as string);
        if (!packages.has(pkg)) packages.set(pkg, relative(root, file));
      }
    }
  };
  visit(entry);
  return packages;
}

describe("engines load lazily", () => {
  test("the walk keeps value imports and drops type-only ones", () => {
    const src = [
      'import type { A } from "type-only";',
      'import { type B, type C } from "types-in-braces";',
      'import { type D, E } from "mixed";',
      'export { F } from "re-export";',
      'import "side-effect";',
      'const g = await import("dynamic");',
    ].join("\n");
    expect(staticImports(src).sort()).toEqual(["mixed", "re-export", "side-effect"]);
    // And it finds a heavy package where one is imported statically (the generated models' vocabulary).
    expect(staticPackages(resolve(root, "src/engines/gguf/vocab.ts")).has("gpt-tokenizer")).toBe(true);
  });

  test.each([
    ["src/server/runtime/start-node.ts", "fastify"],
    ["src/cli/main.ts", "commander"],
    // The remote engine tokenizes on its server; gpt-tokenizer only at its first local use.
    ["src/engines/openai/engine.ts", "zod"],
  ])("%s reaches no engine's heavy package statically", (entry, expected) => {
    const pkgs = staticPackages(resolve(root, entry));
    expect(pkgs.has(expected), `the walk reached ${expected}`).toBe(true);
    for (const heavy of HEAVY) expect(pkgs.get(heavy), `${heavy} is imported statically`).toBeUndefined();
  });

  test("src/cli/main.ts reaches the experiments' report drawing only when an experiment runs", () => {
    const pkgs = staticPackages(resolve(root, "src/cli/main.ts"));
    for (const p of REPORTS) expect(pkgs.get(p), `${p} is imported statically`).toBeUndefined();
    // The walk does see them from an experiment's own module.
    const experiment = staticPackages(resolve(root, "src/experiments/paper.ts"));
    expect(REPORTS.some((p) => experiment.has(p))).toBe(true);
  });
});
