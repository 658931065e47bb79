/**
 * Runs the system `openssl` binary: execFile (no shell, arguments never interpreted), bounded time and
 * output, and one clear error when the binary is missing.
 */
import { execFile } from "node:child_process";

export const DEFAULT_OPENSSL = "openssl";
const TIMEOUT_MS = 15_000;
const MAX_OUTPUT = 1 << 20;

export class OpensslError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OpensslError";
  }
}

export interface OpensslOptions {
  /** Path of the openssl binary (default: `openssl` from PATH). */
  openssl?: string;
}

/** Runs `openssl ...args` and returns its stdout; throws OpensslError with openssl's own message on failure. */
export function runOpenssl(args: readonly string[], opts: OpensslOptions = {}): Promise<string> {
  const bin = opts.openssl ?? DEFAULT_OPENSSL;
  return new Promise((resolve, reject) => {
    execFile(
      bin,
      [...args],
      { timeout: TIMEOUT_MS, maxBuffer: MAX_OUTPUT, windowsHide: true, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (!err) return resolve(stdout);
        const e = err as NodeJS.ErrnoException & { killed?: boolean };
        if (e.code === "ENOENT") {
          return reject(
            new OpensslError(
              `openssl not found (tried '${bin}'); install it (e.g. 'apt-get install openssl') ` +
                "or use shared-secret mode (--secret-file)",
            ),
          );
        }
        if (e.killed) return reject(new OpensslError(`openssl ${args[0]} timed out after ${TIMEOUT_MS} ms`));
        const detail = String(stderr).trim().split("\n").slice(0, 5).join("; ");
        reject(new OpensslError(`openssl ${args[0]} failed: ${detail || e.message}`));
      },
    );
  });
}

/** True when a working openssl is available (lets `prefixmesh cluster` fall back to a shared secret). */
export async function opensslAvailable(opts: OpensslOptions = {}): Promise<boolean> {
  try {
    await runOpenssl(["version"], opts);
    return true;
  } catch {
    return false;
  }
}
