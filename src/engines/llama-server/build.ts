/**
 * Builds llama.cpp's `llama-server` from node-llama-cpp's bundled source with CMake, CPU only and
 * offline, into the per-user cache (see source.ts). Once per machine: when the binary for this source
 * exists, nothing is done. The build runs in a temporary folder beside the cache and the binary is
 * moved in by rename, so an interrupted or concurrent build never leaves a half-written binary.
 */
import { type SpawnSyncOptions, spawnSync } from "node:child_process";
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { availableParallelism } from "node:os";
import { dirname, join } from "node:path";
import { binaryPath, buildDir, CMAKE_FLAGS, findLlamaCppSource, type LlamaCppSource } from "./source.js";

/** A missing tool or a failed step, said in one line with what to do about it. */
export class LlamaServerBuildError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LlamaServerBuildError";
  }
}

export interface BuildOptions {
  /** Parallel compile jobs (default: the machine's cores). */
  jobs?: number;
  /** Rebuild even when the binary exists. */
  force?: boolean;
  /** Progress lines (default stderr). The compilers' own output goes to the inherited stdio. */
  log?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

export interface BuildOutcome {
  binary: string;
  source: LlamaCppSource;
  /** false: the binary was already there. */
  built: boolean;
  /** Wall time of the build, when one ran. */
  seconds?: number;
}

const MIN_CMAKE = [3, 14] as const;

function run(cmd: string, args: string[], opts: SpawnSyncOptions & { what: string }): void {
  const r = spawnSync(cmd, args, { stdio: "inherit", ...opts });
  if (r.error) throw new LlamaServerBuildError(`${opts.what}: cannot run ${cmd}: ${r.error.message}`);
  if (r.status !== 0)
    throw new LlamaServerBuildError(`${opts.what} failed (${cmd} exited with ${r.status ?? r.signal})`);
}

function version(cmd: string, env: NodeJS.ProcessEnv): string | undefined {
  const r = spawnSync(cmd, ["--version"], { encoding: "utf8", env });
  return r.status === 0 ? r.stdout.split("\n")[0]?.trim() : undefined;
}

/** The tools a build needs, each checked with a message naming the package that provides it. */
export function checkBuildTools(env: NodeJS.ProcessEnv = process.env): {
  cmake: string;
  compiler: string;
  generator: string[];
} {
  const cmake = version("cmake", env);
  if (!cmake)
    throw new LlamaServerBuildError(
      "cmake is not installed (needed to build llama-server): e.g. 'apt-get install cmake build-essential'",
    );
  const m = /(\d+)\.(\d+)/.exec(cmake);
  const [maj, min] = m ? [Number(m[1]), Number(m[2])] : [0, 0];
  if (maj < MIN_CMAKE[0] || (maj === MIN_CMAKE[0] && min < MIN_CMAKE[1]))
    throw new LlamaServerBuildError(`${cmake} is too old: llama.cpp needs cmake ≥ ${MIN_CMAKE.join(".")}`);
  const candidates = env.CXX ? [env.CXX] : ["c++", "g++", "clang++"];
  const cxx = candidates.map((c) => version(c, env)).find((v) => v !== undefined);
  if (!cxx)
    throw new LlamaServerBuildError(
      `no C++ compiler found (tried ${candidates.join(", ")}): e.g. 'apt-get install build-essential'`,
    );
  const ccs = env.CC ? [env.CC] : ["cc", "gcc", "clang"];
  if (!ccs.some((c) => version(c, env) !== undefined))
    throw new LlamaServerBuildError(
      `no C compiler found (tried ${ccs.join(", ")}): e.g. 'apt-get install build-essential'`,
    );
  if (!version("git", env))
    throw new LlamaServerBuildError(
      "git is not installed (needed to unpack the bundled llama.cpp source): e.g. 'apt-get install git'",
    );
  // Ninja when present (its output is one line per step); else CMake's default (make).
  const generator = version("ninja", env) ? ["-G", "Ninja"] : [];
  return { cmake, compiler: cxx, generator };
}

/** Applies node-llama-cpp's patches as it does: each one that applies; one already in is skipped. */
function applyPatches(src: string, patches: string[], log: (l: string) => void): string[] {
  const applied: string[] = [];
  for (const p of patches) {
    const check = spawnSync("git", ["-C", src, "apply", "--check", "--ignore-whitespace", p]);
    if (check.status === 0) {
      run("git", ["-C", src, "apply", "--ignore-whitespace", p], { what: `applying ${p}` });
      applied.push(p);
      continue;
    }
    const reverse = spawnSync("git", ["-C", src, "apply", "--check", "--reverse", "--ignore-whitespace", p]);
    log(
      reverse.status === 0
        ? `patch ${p} is already in the source`
        : `patch ${p} does not apply to this source: building without it`,
    );
  }
  return applied;
}

/** Returns the cached llama-server for the installed node-llama-cpp, building it first if absent. */
export function ensureLlamaServer(o: BuildOptions = {}): BuildOutcome {
  const env = o.env ?? process.env;
  const log = o.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const source = findLlamaCppSource();
  const binary = binaryPath(source, env);
  if (existsSync(binary) && !o.force) return { binary, source, built: false };

  const tools = checkBuildTools(env);
  const jobs = Math.max(1, Math.min(256, Math.floor(o.jobs ?? availableParallelism())));
  const dir = buildDir(source, env);
  const parent = dirname(dir);
  mkdirSync(parent, { recursive: true });
  const work = mkdtempSync(join(parent, `.build-${source.key}-`));
  const t0 = performance.now();
  log(`building llama-server ${source.release} (${source.kind} ${source.path}) with ${jobs} job(s)`);
  log(`  ${tools.cmake}; ${tools.compiler}; work folder ${work}`);
  try {
    const src = join(work, "src");
    const childEnv = { ...env, GIT_TERMINAL_PROMPT: "0" };
    let applied: string[] = [];
    if (source.kind === "bundle") {
      run("git", ["clone", "--quiet", source.path, src], {
        what: "unpacking the source bundle",
        env: childEnv,
      });
      applied = applyPatches(src, source.patches, log);
    }
    const srcDir = source.kind === "bundle" ? src : source.path;
    const out = join(work, "build");
    // --no-warn-unused-cli: FETCHCONTENT_FULLY_DISCONNECTED guards builds that fetch; others ignore it.
    run("cmake", ["-S", srcDir, "-B", out, "--no-warn-unused-cli", ...tools.generator, ...CMAKE_FLAGS], {
      what: "configuring llama.cpp (cmake)",
      env: childEnv,
    });
    run(
      "cmake",
      ["--build", out, "--target", "llama-server", "--config", "Release", "--parallel", String(jobs)],
      { what: "compiling llama-server", env: childEnv },
    );
    const produced = join(out, "bin", "llama-server");
    if (!existsSync(produced)) throw new LlamaServerBuildError(`the build produced no ${produced}`);
    const check = spawnSync(produced, ["--version"], { encoding: "utf8" });
    if (check.status !== 0)
      throw new LlamaServerBuildError(`the built llama-server does not run: ${check.stderr.slice(0, 300)}`);
    const seconds = (performance.now() - t0) / 1000;
    mkdirSync(join(dir, "bin"), { recursive: true });
    const tmp = `${binary}.${process.pid}.tmp`;
    copyFileSync(produced, tmp);
    chmodSync(tmp, 0o755);
    writeFileSync(
      join(dir, "build-info.json"),
      `${JSON.stringify(
        {
          release: source.release,
          key: source.key,
          source: source.path,
          patches: applied,
          version: `${check.stdout}${check.stderr}`.trim(),
          cmakeFlags: CMAKE_FLAGS,
          jobs,
          seconds: Math.round(seconds),
          builtAt: new Date().toISOString(),
        },
        null,
        2,
      )}\n`,
    );
    renameSync(tmp, binary);
    log(`built ${binary} in ${seconds.toFixed(0)} s`);
    return { binary, source, built: true, seconds };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
