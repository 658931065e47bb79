/**
 * The container image for real: scripts/container-check.sh builds the Dockerfile and runs it (the
 * simulated engine answers /health, /ready and a chat completion on 127.0.0.1; with the shared tiny
 * model, the embedded llama.cpp CPU build answers too). Skips with a clear message where no
 * container engine runs. The first build takes minutes (npm ci twice); later ones reuse its layers.
 */
import { execFile, execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";

const root = new URL("../../", import.meta.url).pathname;
const GGUF = "/work/shared/models/stories260K.gguf";

/** The first engine whose daemon answers (`info`), as the check script picks it. */
function runningEngine(): string | undefined {
  for (const engine of ["docker", "podman"]) {
    try {
      execFileSync(engine, ["info"], { stdio: "ignore", timeout: 30_000 });
      return engine;
    } catch {
      // not installed, or no daemon behind it
    }
  }
  return undefined;
}

const ENGINE = runningEngine();
const SKIP =
  "no container engine runs here (docker info and podman info failed): apt-get install podman, or start dockerd";
if (!ENGINE) console.warn(`container image test skipped: ${SKIP}`);
if (ENGINE && !existsSync(GGUF))
  console.warn(`container image test: ${GGUF} absent, llama.cpp in the image not checked`);

describe.skipIf(!ENGINE)(`container image (${ENGINE ?? `skipped: ${SKIP}`})`, () => {
  it("builds, runs as uid 1000 and answers /health, /ready and a chat completion", async () => {
    const env = {
      ...process.env,
      CONTAINER_ENGINE: ENGINE,
      ...(existsSync(GGUF) ? { CHECK_GGUF: GGUF } : {}),
    };
    const { code, out } = await new Promise<{ code: number; out: string }>((resolve) => {
      execFile(
        "sh",
        ["scripts/container-check.sh"],
        { cwd: root, env, timeout: 1_500_000, maxBuffer: 16 << 20 },
        (err, stdout, stderr) =>
          resolve({ code: err ? ((err.code as number) ?? 1) : 0, out: stdout + stderr }),
      );
    });
    expect(out).toMatch(/chat completion: model \S+, served by check: "/);
    expect(out).toContain("runs as uid 1000");
    if (existsSync(GGUF))
      expect(out).toMatch(/chat completion \(llama\.cpp\): model \S+, served by llama: "/);
    expect(out).toContain("container check passed");
    expect(code, out).toBe(0);
    // It leaves no container behind.
    const name = /containers: (prefixmesh-check-\d+),/.exec(out)?.[1] as string;
    expect(name).toBeDefined();
    const left = execFileSync(ENGINE as string, ["ps", "-a", "--format", "{{.Names}}"], { encoding: "utf8" });
    expect(left.split("\n").filter((n) => n.startsWith(name))).toEqual([]);
  }, 1_600_000);
});
