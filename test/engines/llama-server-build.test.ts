/**
 * The llama-server build script's logic without compiling anything: where the bundled source is, the
 * cache key and path, that an existing binary ends the run at once, and the errors for missing tools
 * (fake `cmake` scripts on a PATH of the test's own).
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  checkBuildTools,
  ensureLlamaServer,
  LlamaServerBuildError,
} from "../../src/engines/llama-server/build.js";
import { binaryPath, cacheRoot, findLlamaCppSource } from "../../src/engines/llama-server/source.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), "pm-llama-server-build-"));
  dirs.push(d);
  return d;
};
/** A fake tool on a PATH of our own: prints `version` for `--version`. */
const fakeTool = (dir: string, name: string, version: string) => {
  const p = join(dir, name);
  writeFileSync(p, `#!/bin/sh\necho "${version}"\n`);
  chmodSync(p, 0o755);
};

describe("llama-server build: source and cache", () => {
  it("finds node-llama-cpp's bundled llama.cpp and keys the build by its release and content", () => {
    const s = findLlamaCppSource();
    const info = JSON.parse(readFileSync(join(s.llamaDir, "llama.cpp.info.json"), "utf8")) as { tag: string };
    expect(s.release).toBe(info.tag);
    expect(["bundle", "checkout"]).toContain(s.kind);
    expect(s.key).toMatch(new RegExp(`^${s.release.replace(/\./g, "\\.")}-[0-9a-f]{12}$`));
    expect(findLlamaCppSource().key).toBe(s.key);
  });

  it("caches under $PREFIXMESH_CACHE_DIR, else ~/.cache/prefixmesh", () => {
    const s = findLlamaCppSource();
    expect(binaryPath(s, { PREFIXMESH_CACHE_DIR: "/x" })).toBe(`/x/llama-server/${s.key}/bin/llama-server`);
    expect(cacheRoot({})).toBe(join(homedir(), ".cache", "prefixmesh"));
  });

  it("returns at once when the binary is there: no tool is even looked for", () => {
    const cache = tmp();
    const env = { PREFIXMESH_CACHE_DIR: cache, PATH: tmp() };
    const bin = binaryPath(findLlamaCppSource(), env);
    mkdirSync(dirname(bin), { recursive: true });
    writeFileSync(bin, "");
    const r = ensureLlamaServer({ env, log: () => {} });
    expect(r).toMatchObject({ binary: bin, built: false });
  });
});

describe("llama-server build: missing tools are clear errors", () => {
  it("names cmake, then a too-old cmake, then the compiler, with the package to install", () => {
    const bin = tmp();
    const env = { PATH: bin };
    expect(() => checkBuildTools(env)).toThrow(LlamaServerBuildError);
    expect(() => checkBuildTools(env)).toThrow(/cmake is not installed.*apt-get install cmake/);
    fakeTool(bin, "cmake", "cmake version 3.10.2");
    expect(() => checkBuildTools(env)).toThrow(/cmake version 3\.10\.2 is too old/);
    fakeTool(bin, "cmake", "cmake version 3.25.1");
    expect(() => checkBuildTools(env)).toThrow(/no C\+\+ compiler found \(tried c\+\+, g\+\+, clang\+\+\)/);
    fakeTool(bin, "g++", "g++ (fake) 12");
    expect(() => checkBuildTools(env)).toThrow(/no C compiler found/);
    fakeTool(bin, "cc", "cc (fake) 12");
    expect(() => checkBuildTools(env)).toThrow(/git is not installed/);
    fakeTool(bin, "git", "git version 2.39");
    expect(checkBuildTools(env)).toMatchObject({ cmake: "cmake version 3.25.1", generator: [] });
  });
});
