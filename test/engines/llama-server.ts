/**
 * The real llama.cpp server (`llama-server`, built by `npm run engines:llama-server` from the llama.cpp
 * node-llama-cpp bundles) on 127.0.0.1 with ../shared/models/stories260K.gguf, for engine tests
 * against a server nobody here wrote. Tests skip with a clear message when the binary or the model is
 * absent; in CI (CI=true), where .ci/run builds the binary first, a missing binary is a failure.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { builtLlamaServer } from "../../src/engines/llama-server/source.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { STORIES_260K } from "./helpers.js";

export const LLAMA_SERVER = builtLlamaServer();
/** The name the tests give the model (`--alias`); llama-server would otherwise name it by its path. */
export const MODEL = "stories260K";

/** Why the real-server tests cannot run here, or undefined when they can. Said once per file. */
export function llamaServerSkip(): string | undefined {
  const why = !existsSync(STORIES_260K)
    ? `${STORIES_260K} is absent (shared data not mounted)`
    : !LLAMA_SERVER
      ? "llama-server is not built (run 'npm run engines:llama-server')"
      : undefined;
  if (why) console.warn(`skipping the real llama-server tests: ${why}`);
  return why;
}

/** CI builds the server before the tests (.ci/run): there, a missing binary must fail, not skip. */
export const MUST_RUN_IN_CI = process.env.CI === "true" && existsSync(STORIES_260K) && !LLAMA_SERVER;

export interface LlamaServer {
  /** The server's root URL, e.g. http://127.0.0.1:PORT. */
  url: string;
  child: ChildProcess;
  /** The server's own log (stdout + stderr), for failure messages. */
  log(): string;
  stop(): Promise<void>;
}

export interface LlamaServerOptions {
  /** `-np`: parallel slots (default 2). */
  slots?: number;
  /** `-c`: total context, split evenly between the slots (default 2048). */
  contextTokens?: number;
  /** Extra llama-server flags. */
  args?: string[];
  /** Listen on this port (e.g. to restart a server where its clients expect it); default: a free one. */
  port?: number;
  /** Deadline for the server to become healthy (loading, on a busy machine). */
  readyTimeoutMs?: number;
}

const LOG_LIMIT = 256 * 1024;

function launch(port: number, o: LlamaServerOptions): { child: ChildProcess; log: () => string } {
  const args = [
    ...["-m", STORIES_260K, "--alias", MODEL, "--host", "127.0.0.1", "--port", String(port)],
    ...["-np", String(o.slots ?? 2), "-c", String(o.contextTokens ?? 2048)],
    // One compute thread: the machine is shared by parallel test files, and the model is tiny.
    ...["-t", "1", "--no-ui", "--no-warmup"],
    ...(o.args ?? []),
  ];
  const child = spawn(LLAMA_SERVER!, args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const keep = (d: Buffer) => {
    out += d.toString();
    if (out.length > LOG_LIMIT) out = out.slice(-LOG_LIMIT / 2);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  return { child, log: () => out };
}

/** Waits for `GET /health` to say ok: the model is loaded and the server takes requests. */
async function waitHealthy(url: string, child: ChildProcess, deadlineMs: number): Promise<"ok" | "exited"> {
  const until = Date.now() + deadlineMs;
  while (Date.now() < until) {
    if (child.exitCode !== null || child.signalCode !== null) return "exited";
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) });
      const body = await res.text();
      if (res.status === 200 && body.includes('"ok"')) return "ok";
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`llama-server at ${url} not healthy within ${deadlineMs} ms`);
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

/** Starts llama-server on a free loopback port and resolves once it is healthy. */
export async function startLlamaServer(o: LlamaServerOptions = {}): Promise<LlamaServer> {
  if (!LLAMA_SERVER) throw new Error("llama-server is not built: run 'npm run engines:llama-server'");
  // A free port can be taken between the check and the bind: try another one then.
  for (let attempt = 1; ; attempt++) {
    const port = o.port ?? (await freePort("127.0.0.1"));
    const url = `http://127.0.0.1:${port}`;
    const { child, log } = launch(port, o);
    try {
      const state = await waitHealthy(url, child, o.readyTimeoutMs ?? 120_000);
      if (state === "ok") return { url, child, log, stop: () => stopChild(child) };
    } catch (e) {
      await stopChild(child);
      throw new Error(`${(e as Error).message}\n${log().slice(-4000)}`);
    }
    if (attempt >= 3 || !/bind|address already in use/i.test(log()))
      throw new Error(
        `llama-server exited before it was healthy (code ${child.exitCode}):\n${log().slice(-4000)}`,
      );
  }
}
