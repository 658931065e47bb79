/** The ports held while the engine loads: a clash is found at once, and the API port says "loading". */
import { connect, createServer } from "node:net";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { startExitCode } from "../../src/cli/node.js";
import { resolveProfile } from "../../src/engines/sim/profiles.js";
import { SimEngine } from "../../src/engines/sim/sim-engine.js";
import { holdPorts } from "../../src/server/runtime/port-hold.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((res) => s.listen(0, "127.0.0.1", res));
  const { port } = s.address() as { port: number };
  await new Promise<void>((res) => s.close(() => res()));
  return port;
}

describe("holdPorts", () => {
  it("names both flags when they share a port on different hosts (exit 2, not 'in use')", async () => {
    const port = await freePort();
    const err = await holdPorts(
      [
        { flag: "--peer-listen", address: `0.0.0.0:${port}`, role: "peer" },
        { flag: "--listen", address: `127.0.0.1:${port}`, role: "api" },
      ],
      "n0",
    ).catch((e: Error) => e);
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
      const err = await holdPorts(
        [
          { flag: "--peer-listen", address: "127.0.0.1:0", role: "peer" },
          { flag: "--listen", address: `127.0.0.1:${port}`, role: "api" },
        ],
        "n0",
      ).catch((e: Error) => e);
      expect((err as Error).message).toMatch(/^--listen 127\.0\.0\.1:\d+: address already in use/);
      expect(startExitCode(err)).toBe(1);
    } finally {
      await new Promise<void>((res) => other.close(() => res()));
    }
  });

  it("answers 503 in the API's shapes while held, closes peers, and lets both ports go", async () => {
    const [api, peer] = [await freePort(), await freePort()];
    const held = await holdPorts(
      [
        { flag: "--peer-listen", address: `127.0.0.1:${peer}`, role: "peer" },
        { flag: "--listen", address: `127.0.0.1:${api}`, role: "api" },
      ],
      "n7",
    );
    try {
      const health = await fetch(`http://127.0.0.1:${api}/health`);
      expect(health.status).toBe(503);
      expect(await health.json()).toEqual({ status: "loading", node: "n7" });
      const ready = await fetch(`http://127.0.0.1:${api}/ready?x=1`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ ready: false, node: "n7" });
      const chat = await fetch(`http://127.0.0.1:${api}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      expect(chat.status).toBe(503);
      expect(chat.headers.get("retry-after")).toBe("5");
      expect(((await chat.json()) as { error: { message: string } }).error.message).toMatch(/loading/);
      // A peer connecting to the peer port is closed at once (it sees the node unreachable).
      const closed = await new Promise<boolean>((res) => {
        const s = connect(peer, "127.0.0.1");
        s.on("close", () => res(true));
        s.on("error", () => undefined);
      });
      expect(closed).toBe(true);
      // Another process cannot take a held port.
      const other = createServer();
      const taken = await new Promise<string>((res) => {
        other.once("error", (e: NodeJS.ErrnoException) => res(e.code ?? "?"));
        other.listen(api, "127.0.0.1", () => res("bound"));
      });
      if (taken === "bound") await new Promise<void>((res) => other.close(() => res()));
      expect(taken).toBe("EADDRINUSE");
    } finally {
      await held.release();
    }
    // Released: both bind again at once.
    for (const port of [api, peer]) {
      const s = createServer();
      await new Promise<void>((res, rej) => {
        s.once("error", rej);
        s.listen(port, "127.0.0.1", res);
      });
      await new Promise<void>((res) => s.close(() => res()));
    }
  });
});

describe("startNode's held ports", () => {
  it("are let go when the node fails to start after its engine loaded", async () => {
    const [api, peer] = [await freePort(), await freePort()];
    const engine = new SimEngine({ profile: resolveProfile("paper-h100-qwen0.5b") });
    // A capacity the node's config refuses: the start fails after the load, before the servers bind.
    engine.info.capacityTokens = 0;
    const settings = resolveNodeSettings(
      {
        id: "A",
        engine: "sim",
        logLevel: "silent",
        listen: `127.0.0.1:${api}`,
        peerListen: `127.0.0.1:${peer}`,
        calibrationMs: 0,
      },
      {},
    );
    const err = await startNode(settings, { logger: pino({ level: "silent" }), engine }).catch(
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(Error);
    for (const port of [api, peer]) {
      const s = createServer();
      const got = await new Promise<string>((res) => {
        s.once("error", (e: NodeJS.ErrnoException) => res(e.code ?? "?"));
        s.listen(port, "127.0.0.1", () => res("bound"));
      });
      if (got === "bound") await new Promise<void>((res) => s.close(() => res()));
      expect(got, `port ${port}`).toBe("bound");
    }
  });
});
