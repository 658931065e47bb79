/** `--listen localhost:…` binds one address, so its connection limit holds for every connection. */
import { lookup } from "node:dns/promises";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { bindHost } from "../../src/server/runtime/bind-host.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { rawConnection } from "./raw-connection.js";

const logger = pino({ level: "silent" });

describe("a listen on localhost", () => {
  it("names the first address localhost resolves to, and leaves other hosts alone", async () => {
    const first = (await lookup("localhost")).address;
    expect(await bindHost("localhost")).toBe(first);
    expect(await bindHost("LocalHost")).toBe(first);
    expect(await bindHost("127.0.0.1")).toBe("127.0.0.1");
    expect(await bindHost("::")).toBe("::");
  });

  it("binds the ports on that one address, where the per-address connection limit holds", async () => {
    const first = (await lookup("localhost")).address;
    const s = resolveNodeSettings(
      {
        id: "A",
        engine: "sim",
        logLevel: "silent",
        listen: "localhost:0",
        peerListen: "localhost:0",
        maxConnectionsPerAddress: 1,
      },
      {},
    );
    const node = await startNode(s, { logger });
    try {
      const host = (url: string) => new URL(url).hostname.replace(/^\[|\]$/g, "");
      expect(host(node.apiUrl)).toBe(first);
      expect(host(node.peerUrl)).toBe(first);
      if (first !== "127.0.0.1") return; // the raw connections below speak IPv4 loopback only
      const held = await rawConnection(node.apiUrl);
      const refused = await rawConnection(node.apiUrl);
      const answer = await new Promise<string>((ok) => {
        let text = "";
        refused.socket.on("data", (d) => {
          text += d.toString();
          if (text.includes("\r\n\r\n")) ok(text);
        });
      });
      expect(answer).toMatch(/^HTTP\/1\.1 429/);
      held.socket.destroy();
      refused.socket.destroy();
    } finally {
      await node.stop();
    }
  });
});
