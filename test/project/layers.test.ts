import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";

/** The architecture's rule, checked: src/core is pure and depends on nothing of ours outside itself. */
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const core = join(root, "src/core");

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

describe("src/core stays pure", () => {
  const files = tsFiles(core);

  test("has files to check", () => {
    expect(files.length).toBeGreaterThan(10);
  });

  test.each(files.map((f) => [relative(root, f), f]))("%s imports only core, no I/O", (_name, file) => {
    const src = readFileSync(file, "utf8");
    // Static (`from "x"`), side-effect (`import "x"`) and dynamic (`import("x")`) imports alike.
    for (const m of src.matchAll(/(?:\bfrom\s+|\bimport\s*\(?\s*)"([^"]+)"/g)) {
      const spec = m[1] as string;
      expect(spec.startsWith("node:"), `${spec}: no Node built-ins in core`).toBe(false);
      if (spec.startsWith(".")) {
        const target = resolve(dirname(file), spec);
        expect(target.startsWith(`${core}/`), `${spec} leaves src/core`).toBe(true);
      }
    }
    const code = src.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "");
    expect(code).not.toMatch(
      /\bDate\.now\(|\bnew Date\(|\bMath\.random\(|\bsetTimeout\(|\bsetInterval\(|\bsetImmediate\(|\bperformance\.now\(|\bprocess\./,
    );
  });
});
