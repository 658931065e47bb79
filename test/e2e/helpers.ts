/** Spawning the built CLI for multi-process tests (loopback only). */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

export const CLI = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));

/** Fails with a clear message when the build output is missing (the npm test script builds first). */
export function requireBuild(): string {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run 'npm run build' before the e2e tests`);
  return CLI;
}

export interface Spawned {
  child: ChildProcess;
  output(): string;
  /** Resolves with the first stdout line matching `re`; rejects if the process exits first or on timeout. */
  waitForLine(re: RegExp, timeoutMs: number): Promise<string>;
  exited: Promise<number | null>;
}

export function spawnCli(args: string[], env: NodeJS.ProcessEnv = {}): Spawned {
  const child = spawn(process.execPath, [requireBuild(), ...args], {
    stdio: ["pipe", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  let out = "";
  let err = "";
  child.stdout?.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr?.on("data", (d: Buffer) => {
    err += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return {
    child,
    output: () => `${out}\n--- stderr ---\n${err}`,
    exited,
    waitForLine(re, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const line = out.split("\n").find((l) => re.test(l));
          if (line !== undefined) {
            cleanup();
            resolve(line);
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`timed out waiting for ${re}\n${out}\n${err}`));
        }, timeoutMs);
        const onExit = (code: number | null) => {
          cleanup();
          reject(new Error(`process exited (${code}) before printing ${re}\n${out}\n${err}`));
        };
        const cleanup = () => {
          clearTimeout(timer);
          child.stdout?.off("data", check);
          child.off("exit", onExit);
        };
        child.stdout?.on("data", check);
        child.once("exit", onExit);
        check();
      });
    },
  };
}

export function alive(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export async function waitFor(
  cond: () => Promise<boolean> | boolean,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until every API URL answers `/ready` with 200. */
export async function waitAllReady(api: readonly string[], timeoutMs: number, what: string): Promise<void> {
  const ready = (u: string) =>
    fetch(`${u}/ready`).then(
      (r) => r.ok,
      () => false,
    );
  await waitFor(async () => (await Promise.all(api.map(ready))).every(Boolean), timeoutMs, what);
}

export interface ClusterInfo {
  auth: string;
  dir: string;
  nodes: { id: string; apiUrl: string; peerUrl: string; pid: number }[];
}

/** A prompt of `n` words `tag0 tag1 …`: n tokens for the simulated engine, distinct per tag. */
export const words = (tag: string, n: number): string =>
  Array.from({ length: n }, (_, i) => `${tag}${i}`).join(" ");

/**
 * A temp root for the `prefixmesh cluster` processes a test file starts (the command keeps their logs
 * after stop): pass `env` to spawnCli, call `remove` after the file's tests.
 */
export function clusterTmp(): { env: NodeJS.ProcessEnv; remove(): void } {
  const root = mkdtempSync(join(tmpdir(), "pm-e2e-"));
  return { env: { TMPDIR: root }, remove: () => rmSync(root, { recursive: true, force: true }) };
}
