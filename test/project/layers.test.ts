import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";

/**
 * The architecture's layer order, checked on every import in src/:
 *   core < engines, net, workload < sim < server < experiments, bench < cli
 * A file may import its own folder or a folder of a LOWER level; folders on one level do not import
 * each other. src/core is also pure: no Node built-ins, no clock, no randomness, no timers.
 */
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const src = join(root, "src");

const LEVELS: Readonly<Record<string, number>> = {
  core: 0,
  engines: 1,
  net: 1,
  workload: 1,
  sim: 2,
  server: 3,
  experiments: 4,
  bench: 4,
  cli: 5,
};

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** Static (`from "x"`), side-effect (`import "x"`) and dynamic (`import("x")`) import specifiers. */
function importsOf(code: string): string[] {
  return [...code.matchAll(/(?:\bfrom\s+|\bimport\s*\(?\s*)"([^"]+)"/g)].map((m) => m[1] as string);
}

/** The top-level folder of src/ a path lies in. */
function folderOf(path: string): string {
  return relative(src, path).split(sep)[0] as string;
}

/** Why `spec`, imported by `file`, breaks the order (undefined: it does not). */
function layerViolation(file: string, spec: string): string | undefined {
  if (!spec.startsWith(".")) return undefined;
  const from = folderOf(file);
  const to = folderOf(resolve(dirname(file), spec));
  if (to === from) return undefined;
  const lf = LEVELS[from];
  const lt = LEVELS[to];
  if (lf === undefined) return `src/${from} has no level`;
  if (lt === undefined) return `${spec} leaves src/ or reaches a folder with no level`;
  if (lt >= lf) return `src/${from} (level ${lf}) imports src/${to} (level ${lt}): ${spec}`;
  return undefined;
}

const files = tsFiles(src);

describe("the layer order", () => {
  test("every folder of src/ has a level", () => {
    const folders = readdirSync(src, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
    expect(folders.filter((f) => LEVELS[f] === undefined)).toEqual([]);
    expect(files.length).toBeGreaterThan(100);
  });

  test.each(files.map((f) => [relative(root, f), f]))("%s imports only lower levels", (_name, file) => {
    const bad = importsOf(readFileSync(file, "utf8"))
      .map((spec) => layerViolation(file, spec))
      .filter((v) => v !== undefined);
    expect(bad).toEqual([]);
  });

  test("an upward or sideways import is caught", () => {
    expect(layerViolation(join(src, "core/node/node.ts"), "../../sim/run.js")).toMatch(/level 0.*level 2/);
    expect(layerViolation(join(src, "server/api.ts"), "../cli/main.js")).toMatch(/imports src\/cli/);
    expect(layerViolation(join(src, "net/delay.ts"), "../engines/errors.js")).toMatch(/imports src\/engines/);
    expect(layerViolation(join(src, "cli/main.ts"), "../core/prng.js")).toBeUndefined();
    expect(layerViolation(join(src, "sim/run.ts"), "./network.js")).toBeUndefined();
  });
});

/** Import cycles among `files` (type-only imports included), each as its files in order; none expected. */
function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (f: string): void => {
    state.set(f, "open");
    path.push(f);
    for (const d of graph.get(f) ?? []) {
      if (state.get(d) === "open") cycles.push(path.slice(path.indexOf(d)));
      else if (!state.has(d)) visit(d);
    }
    path.pop();
    state.set(f, "done");
  };
  for (const f of graph.keys()) if (!state.has(f)) visit(f);
  return cycles;
}

function importGraph(): Map<string, string[]> {
  const known = new Set(files);
  return new Map(
    files.map((f) => [
      f,
      importsOf(readFileSync(f, "utf8"))
        .filter((spec) => spec.startsWith("."))
        .map((spec) => resolve(dirname(f), spec).replace(/\.js$/, ".ts"))
        .filter((d) => known.has(d)),
    ]),
  );
}

describe("no import cycles", () => {
  test("no file of src/ reaches itself through its imports", () => {
    const cycles = importCycles(importGraph()).map((c) => c.map((f) => relative(root, f)).join(" → "));
    expect(cycles).toEqual([]);
  });

  test("a cycle is caught", () => {
    const g = new Map([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a"]],
      ["d", ["a"]],
    ]);
    expect(importCycles(g)).toEqual([["a", "b", "c"]]);
    expect(
      importCycles(
        new Map([
          ["a", ["b"]],
          ["b", []],
        ]),
      ),
    ).toEqual([]);
  });
});

describe("src/core stays pure", () => {
  const core = files.filter((f) => folderOf(f) === "core");

  test.each(core.map((f) => [relative(root, f), f]))("%s: no I/O, clock or randomness", (_name, file) => {
    const text = readFileSync(file, "utf8");
    for (const spec of importsOf(text)) {
      expect(spec.startsWith("node:"), `${spec}: no Node built-ins in core`).toBe(false);
    }
    const code = text.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "");
    expect(code).not.toMatch(
      /\bDate\.now\(|\bnew Date\(|\bMath\.random\(|\bsetTimeout\(|\bsetInterval\(|\bsetImmediate\(|\bperformance\.now\(|\bprocess\./,
    );
  });
});
