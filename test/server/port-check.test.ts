/** The ports tried before the engine loads: a clash between the node's own two flags is a usage error. */
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { startExitCode } from "../../src/cli/node.js";
import { checkPorts } from "../../src/server/runtime/port-check.js";

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((res) => s.listen(0, "127.0.0.1", res));
  const { port } = s.address() as { port: number };
  await new Promise<void>((res) => s.close(() => res()));
  return port;
}

describe("checkPorts", () => {
  it("names both flags when they share a port on different hosts (exit 2, not 'in use')", async () => {
    const port = await freePort();
    const err = await checkPorts([
      { flag: "--peer-listen", address: `0.0.0.0:${port}` },
      { flag: "--listen", address: `127.0.0.1:${port}` },
    ]).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(
      new RegExp(`--peer-listen 0\\.0\\.0\\.0:${port} and --listen 127\\.0\\.0\\.1:${port}`),
    );
    expect((err as Error).message).not.toMatch(/another process/);
    expect(startExitCode(err)).toBe(2);
  });

  it("still says 'in use' (exit 1) for a port another process holds", async () => {
    const other = createServer();
    await new Promise<void>((res) => other.listen(0, "127.0.0.1", res));
    const { port } = other.address() as { port: number };
    try {
      const err = await checkPorts([
        { flag: "--peer-listen", address: "127.0.0.1:0" },
        { flag: "--listen", address: `127.0.0.1:${port}` },
      ]).catch((e: Error) => e);
      expect((err as Error).message).toMatch(/^--listen 127\.0\.0\.1:\d+: address already in use/);
      expect(startExitCode(err)).toBe(1);
    } finally {
      await new Promise<void>((res) => other.close(() => res()));
    }
  });
});
