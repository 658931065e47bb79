/**
 * The CLI's exit codes (README, "Exit codes"): 0 done, 1 a failure at run time, 2 a usage or
 * configuration error, whichever part of the start-up finds it.
 */
import { spawnSync } from "node:child_process";
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { envName } from "../../src/server/settings/index.js";
import { requireBuild } from "./helpers.js";

/** The environment without any PREFIXMESH_* variable of the shell that runs the tests. */
function cleanEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("PREFIXMESH_")) env[k] = v;
  return { ...env, ...extra };
}

function run(args: string[], extraEnv: Record<string, string> = {}) {
  const r = spawnSync(process.execPath, [requireBuild(), ...args], {
    env: cleanEnv(extraEnv),
    encoding: "utf8",
    timeout: 60_000,
  });
  return { code: r.status, stderr: r.stderr };
}

const NODE = ["node", "--id", "A", "--listen", "127.0.0.1:0", "--peer-listen", "127.0.0.1:0"];

describe("prefixmesh exit codes", () => {
  let busy: Server;
  let busyPort = 0;
  beforeAll(async () => {
    busy = createServer();
    await new Promise<void>((res) => busy.listen(0, "127.0.0.1", res));
    busyPort = (busy.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((res) => busy.close(() => res())));

  it("0 for --help", () => {
    expect(run(["node", "--help"]).code).toBe(0);
  });

  it("2 for usage and configuration errors, with one line naming the problem", () => {
    const typo = envName("pollMs").replace("POLL", "POL");
    const cases: [string[], Record<string, string>, RegExp][] = [
      [["nosuch"], {}, /unknown command/],
      [["node", "--bogus"], {}, /unknown option/],
      [["node"], {}, /--id is required/],
      [[...NODE, "--poll-ms", "soon"], {}, /--poll-ms/],
      [NODE, { [typo]: "200" }, /did you mean PREFIXMESH_POLL_MS/],
      [[...NODE, "--engine", "openai"], {}, /--engine openai needs --engine-url/],
      [[...NODE, "--engine", "llamacpp", "--model", "/nonexistent/m.gguf"], {}, /no such file/],
      [[...NODE, "--engine", "llamacpp", "--adapters", "x"], {}, /--adapters needs/],
    ];
    for (const [args, env, message] of cases) {
      const r = run(args, env);
      expect(r.stderr, args.join(" ")).toMatch(message);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(2);
    }
  });

  it("1 for a failure at run time: the API port is held by another process", () => {
    const r = run([
      "node",
      "--id",
      "A",
      "--engine",
      "sim",
      "--listen",
      `127.0.0.1:${busyPort}`,
      "--peer-listen",
      "127.0.0.1:0",
    ]);
    expect(r.stderr).toMatch(/--listen 127\.0\.0\.1:\d+: address already in use/);
    expect(r.code).toBe(1);
  });
});
