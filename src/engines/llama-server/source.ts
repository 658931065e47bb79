/**
 * Where llama.cpp's own OpenAI-compatible server (`llama-server`) comes from and where its build is
 * cached. The source is the llama.cpp release node-llama-cpp ships (its `llama/` folder: a git bundle
 * of one commit, or a checkout in `llama/llama.cpp` after `node-llama-cpp source download`), so the
 * server under test is the same llama.cpp the embedded engine runs, and no download is needed.
 * The build is cached per machine under `$PREFIXMESH_CACHE_DIR/llama-server/<key>/bin/llama-server`
 * (default `~/.cache/prefixmesh`), the key naming the release and hashing the source and the recipe.
 */
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** Bumped when the build recipe changes in a way the flags below do not show. */
const RECIPE_VERSION = 1;

/**
 * CMake flags: CPU only (no CUDA, Vulkan, Metal, BLAS), no network features (no OpenSSL, no UI
 * download, FetchContent disconnected), only what the server needs, static libraries so the binary
 * stands alone, and llama.cpp's fixed instruction set for the architecture (GGML_NATIVE off) rather
 * than this CPU's: the cache may outlive the CPU it was built on (a disk handed to another host).
 */
export const CMAKE_FLAGS: readonly string[] = [
  "-DCMAKE_BUILD_TYPE=Release",
  "-DBUILD_SHARED_LIBS=OFF",
  "-DGGML_NATIVE=OFF",
  "-DGGML_CUDA=OFF",
  "-DGGML_VULKAN=OFF",
  "-DGGML_METAL=OFF",
  "-DGGML_BLAS=OFF",
  "-DGGML_RPC=OFF",
  "-DLLAMA_BUILD_COMMON=ON",
  "-DLLAMA_BUILD_TOOLS=ON",
  "-DLLAMA_BUILD_SERVER=ON",
  "-DLLAMA_BUILD_TESTS=OFF",
  "-DLLAMA_BUILD_EXAMPLES=OFF",
  "-DLLAMA_BUILD_APP=OFF",
  "-DLLAMA_BUILD_UI=OFF",
  "-DLLAMA_USE_PREBUILT_UI=OFF",
  "-DLLAMA_OPENSSL=OFF",
  "-DLLAMA_LLGUIDANCE=OFF",
  "-DFETCHCONTENT_FULLY_DISCONNECTED=ON",
];

export interface LlamaCppSource {
  /** node-llama-cpp's `llama/` folder. */
  llamaDir: string;
  /** The llama.cpp release node-llama-cpp names (`llama.cpp.info.json`), e.g. "b6000". */
  release: string;
  /** How the source is held: a git bundle to clone, or a checkout to build in place. */
  kind: "bundle" | "checkout";
  /** The bundle file or the checkout folder. */
  path: string;
  /** node-llama-cpp's patches to llama.cpp (applied as it applies them to its own build). */
  patches: string[];
  /** `<release>-<hash>`: one cache folder per source, patches and recipe. */
  key: string;
}

/** Finds the llama.cpp source bundled with the installed node-llama-cpp; a clear error if absent. */
export function findLlamaCppSource(): LlamaCppSource {
  let entry: string;
  try {
    // The package's exports do not include package.json: its root is above the entry point.
    entry = fileURLToPath(import.meta.resolve("node-llama-cpp"));
  } catch {
    throw new Error("node-llama-cpp is not installed: run 'npm ci' first");
  }
  let root = dirname(entry);
  while (!existsSync(join(root, "package.json")) && dirname(root) !== root) root = dirname(root);
  const llamaDir = join(root, "llama");
  const info = join(llamaDir, "llama.cpp.info.json");
  let release = "unknown";
  if (existsSync(info)) {
    const tag = (JSON.parse(readFileSync(info, "utf8")) as { tag?: unknown }).tag;
    if (typeof tag === "string" && /^[A-Za-z0-9._-]{1,64}$/.test(tag)) release = tag;
  }
  const patchDir = join(llamaDir, "patches");
  const patches = existsSync(patchDir)
    ? readdirSync(patchDir)
        .filter((f) => f.endsWith(".diff") || f.endsWith(".patch"))
        .sort()
        .map((f) => join(patchDir, f))
    : [];
  const hash = createHash("sha256").update(`recipe ${RECIPE_VERSION}\n${CMAKE_FLAGS.join("\n")}\n`);
  for (const p of patches) hash.update(readFileSync(p));

  const checkout = join(llamaDir, "llama.cpp");
  const bundle = join(llamaDir, "gitRelease.bundle");
  let kind: LlamaCppSource["kind"];
  let path: string;
  if (existsSync(join(checkout, "CMakeLists.txt"))) {
    // A checkout (node-llama-cpp's `source download`) is identified by its commit.
    kind = "checkout";
    path = checkout;
    const head = spawnSync("git", ["-C", checkout, "rev-parse", "HEAD"], { encoding: "utf8" });
    if (head.status !== 0) throw new Error(`${checkout} is not a git checkout: cannot tell its version`);
    hash.update(`checkout ${head.stdout.trim()}`);
  } else if (existsSync(bundle)) {
    kind = "bundle";
    path = bundle;
    hash.update(`bundle ${statSync(bundle).size}\n`);
    hash.update(readFileSync(bundle));
  } else {
    throw new Error(
      `no llama.cpp source in ${llamaDir} (neither gitRelease.bundle nor llama.cpp/): reinstall node-llama-cpp`,
    );
  }
  return { llamaDir, release, kind, path, patches, key: `${release}-${hash.digest("hex").slice(0, 12)}` };
}

/** The per-user cache root: `$PREFIXMESH_CACHE_DIR`, else `~/.cache/prefixmesh`. */
export function cacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  return env.PREFIXMESH_CACHE_DIR ? env.PREFIXMESH_CACHE_DIR : join(homedir(), ".cache", "prefixmesh");
}

/** The cache folder of one source's build. */
export function buildDir(source: LlamaCppSource, env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheRoot(env), "llama-server", source.key);
}

/** Where the server binary of `source` lives once built. */
export function binaryPath(source: LlamaCppSource, env: NodeJS.ProcessEnv = process.env): string {
  return join(buildDir(source, env), "bin", "llama-server");
}

/** The built server for the installed node-llama-cpp, or undefined when it is not built (or no source). */
export function builtLlamaServer(env: NodeJS.ProcessEnv = process.env): string | undefined {
  let source: LlamaCppSource;
  try {
    source = findLlamaCppSource();
  } catch {
    return undefined;
  }
  const bin = binaryPath(source, env);
  return existsSync(bin) ? bin : undefined;
}
