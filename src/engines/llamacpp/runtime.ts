/**
 * One llama.cpp runtime per process (CPU build only: GPU builds are deliberately not installed).
 * Imported lazily so processes running other engines never load node-llama-cpp.
 * maxThreads 0 makes each context's `threads` the exact count rather than a share of a pool.
 * llama.cpp's own log lines are kept (last few errors) so load failures can say why.
 */
import type { Llama } from "node-llama-cpp";

let runtime: Promise<Llama> | undefined;
const recentErrors: string[] = [];
const KEEP = 8;

export function cpuLlama(): Promise<Llama> {
  runtime ??= import("node-llama-cpp")
    .then(({ getLlama, LlamaLogLevel }) =>
      getLlama({
        gpu: false,
        build: "never",
        maxThreads: 0,
        logLevel: LlamaLogLevel.error,
        progressLogs: false,
        logger: (level, message) => {
          if (level === LlamaLogLevel.error || level === LlamaLogLevel.fatal) {
            recentErrors.push(message.trim());
            if (recentErrors.length > KEEP) recentErrors.shift();
          }
        },
      }),
    )
    .catch((e) => {
      runtime = undefined;
      throw e;
    });
  return runtime;
}

/** Takes (and clears) llama.cpp's recent error log lines. */
export function takeLlamaErrors(): string[] {
  return recentErrors.splice(0, recentErrors.length);
}
