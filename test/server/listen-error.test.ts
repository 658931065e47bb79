/** A node whose port will not bind says which flag and address, and why, in the operator's terms. */
import { createServer } from "node:http";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { startExitCode } from "../../src/cli/node.js";
import { bound } from "../../src/server/runtime/listen-error.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

const settings = (o: Record<string, unknown>) =>
  resolveNodeSettings(
    { id: "A", engine: "sim", logLevel: "silent", listen: "127.0.0.1:0", peerListen: "127.0.0.1:0", ...o },
    {},
  );
const logger = pino({ level: "silent" });

describe("a port that will not bind", () => {
  // The cluster launcher restarts on fresh ports when a node's start failed with EADDRINUSE.
  it("names --listen or --peer-listen when another process holds the address, and keeps the code", async () => {
    const a = await startNode(settings({}), { logger });
    try {
      const api = new URL(a.apiUrl).host;
      const peer = new URL(a.peerUrl).host;
      await expect(startNode(settings({ id: "B", listen: api }), { logger })).rejects.toThrow(
        new RegExp(`^--listen ${api}: address already in use.*\\(EADDRINUSE\\)$`),
      );
      await expect(startNode(settings({ id: "B", peerListen: peer }), { logger })).rejects.toThrow(
        new RegExp(`^--peer-listen ${peer}: address already in use`),
      );
    } finally {
      await a.stop();
    }
  });

  it("says when the address is not this machine's", async () => {
    // TEST-NET-1 is never a local address.
    const err = await startNode(settings({ listen: "192.0.2.1:8080" }), { logger }).catch((e) => e);
    expect(err.message).toMatch(/^--listen 192\.0\.2\.1:8080: not an address of this machine/);
    // The flag must change: a usage error, where a port in use is a failure at run time (1).
    expect(startExitCode(err)).toBe(2);
  });

  it("is found before the engine loads: the engine is never asked, and the ports are free again", async () => {
    // An engine server that counts what it is asked (the openai engine asks it for its model at load).
    let asked = 0;
    const engine = createServer((_req, res) => {
      asked++;
      res.writeHead(503).end();
    });
    await new Promise<void>((res) => engine.listen(0, "127.0.0.1", res));
    const engineUrl = `http://127.0.0.1:${(engine.address() as { port: number }).port}`;
    const a = await startNode(settings({}), { logger });
    try {
      const api = new URL(a.apiUrl).host;
      const peer = new URL(a.peerUrl).host;
      const openai = { engine: "openai", engineUrl, model: "m" };
      await expect(startNode(settings({ id: "B", listen: api, ...openai }), { logger })).rejects.toThrow(
        new RegExp(`^--listen ${api}: address already in use`),
      );
      await expect(startNode(settings({ id: "B", listen: peer, ...openai }), { logger })).rejects.toThrow(
        new RegExp(`^--listen ${peer}: address already in use`),
      );
      expect(asked).toBe(0);
    } finally {
      await a.stop();
      engine.close();
    }
    // The check let its ports go: a node binds them.
    const again = await startNode(settings({ listen: new URL(a.apiUrl).host }), { logger });
    await again.stop();
  });

  it("holds both ports while the engine loads, the API saying it is loading", async () => {
    const free = async () => {
      const s = createServer();
      await new Promise<void>((res) => s.listen(0, "127.0.0.1", res));
      const { port } = s.address() as { port: number };
      await new Promise<void>((res) => s.close(() => res()));
      return `127.0.0.1:${port}`;
    };
    const [listen, peerListen] = [await free(), await free()];
    // An engine server whose first answer waits until the test has looked at the node's ports.
    let looked: () => void = () => undefined;
    const lookedAt = new Promise<void>((res) => {
      looked = res;
    });
    let asked!: () => void;
    const askedAt = new Promise<void>((res) => {
      asked = res;
    });
    const engine = createServer((_req, res) => {
      asked();
      // Then a connection torn down on every request (the openai engine starts without its answers).
      void lookedAt.then(() => res.socket?.destroy());
    });
    await new Promise<void>((res) => engine.listen(0, "127.0.0.1", res));
    const engineUrl = `http://127.0.0.1:${(engine.address() as { port: number }).port}`;
    const starting = startNode(settings({ listen, peerListen, engine: "openai", engineUrl, model: "m" }), {
      logger,
    }).catch((e: Error) => e);
    try {
      await askedAt;
      const health = await fetch(`http://${listen}/health`);
      expect(health.status).toBe(503);
      expect(await health.json()).toEqual({ status: "loading", node: "A" });
    } finally {
      looked();
    }
    const started = await starting;
    engine.close();
    if (started instanceof Error) throw started;
    try {
      // The node's own server took the port over from the holder.
      const ready = await fetch(`http://${listen}/health`);
      expect(ready.status).toBe(200);
    } finally {
      await started.stop();
    }
  });

  it("exits 1 (a retry may succeed) for a temporary DNS failure, 2 for a name that does not resolve", async () => {
    const failing = (code: string) => Promise.reject(Object.assign(new Error(code), { code }));
    const again = await bound("--listen", "node.example:80", failing("EAI_AGAIN")).catch((e) => e);
    expect(again.message).toMatch(/^--listen node\.example:80: .*temporary DNS failure\) \(EAI_AGAIN\)$/);
    expect(startExitCode(again)).toBe(1);
    const never = await bound("--listen", "node.invalid:80", failing("ENOTFOUND")).catch((e) => e);
    expect(startExitCode(never)).toBe(2);
  });

  it("refuses --listen and --peer-listen naming one address", async () => {
    await expect(
      startNode(settings({ listen: "127.0.0.1:39999", peerListen: "127.0.0.1:39999" }), { logger }),
    ).rejects.toThrow(/--peer-listen and --listen are the same address 127\.0\.0\.1:39999/);
  });
});
