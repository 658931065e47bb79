/**
 * Forwards to peers that misbehave: refused connections, streams cut off or split mid-character,
 * trickling or silent peers.
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { insecureAuth } from "../../src/net/transport-auth.js";
import { TransportError } from "../../src/net/transport-client.js";
import { fwd } from "./fixtures.js";
import { peerHarness } from "./transport-fixtures.js";

const { client, rawPeer } = peerHarness();

// These peers are plain HTTP servers scripted to misbehave: they exercise forwards sent as one HTTP
// request each (--forward-transport http); test/net/forward-channel.test.ts does the same for channels.
describe("peer transport failures (HTTP forwards)", () => {
  it.each(["http", "channel"] as const)(
    "classifies a refused connection as a connection failure (%s)",
    async (transport) => {
      const probe = createServer();
      await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
      const port = (probe.address() as AddressInfo).port;
      await new Promise((r) => probe.close(r));
      const c = client(insecureAuth("A"), {}, transport);
      c.setPeer("B", `http://127.0.0.1:${port}`);
      const err = await c.forward("B", fwd("A-1"), () => {}).catch((e) => e);
      expect(err).toBeInstanceOf(TransportError);
      expect((err as TransportError).kind).toBe("connection");
    },
  );

  it("surfaces a stream cut off mid-answer as an error at once, never a short answer", async () => {
    const url = await rawPeer((_req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(`${JSON.stringify({ t: "chunk", text: "partial" })}\n`);
      setTimeout(() => res.socket?.destroy(), 20);
    });
    const c = client(insecureAuth("A"), {}, "http");
    c.setPeer("B", url);
    const chunks: string[] = [];
    const t0 = performance.now();
    const err = await c.forward("B", fwd("A-1"), (t) => chunks.push(t)).catch((e) => e);
    expect(chunks).toEqual(["partial"]);
    expect(err).toBeInstanceOf(TransportError);
    expect(["connection", "cut-off"]).toContain((err as TransportError).kind);
    // At the cut, not at the stream gap timeout (30 s): generous for a busy machine, far below that.
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  it("decodes a multi-byte character split across two network writes", async () => {
    const line = Buffer.from(`${JSON.stringify({ t: "chunk", text: "née €" })}\n`);
    const cut = line.indexOf(Buffer.from("€")) + 1; // inside the 3-byte euro sign
    const url = await rawPeer((_req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(line.subarray(0, cut));
      setTimeout(() => {
        res.write(line.subarray(cut));
        res.end(
          `${JSON.stringify({ t: "msg", msg: { type: "error", reqId: "A-1", attempt: 0, error: "x", retryable: true } })}\n`,
        );
      }, 30);
    });
    const c = client(insecureAuth("A"), {}, "http");
    c.setPeer("B", url);
    const chunks: string[] = [];
    const reply = await c.forward("B", fwd("A-1"), (t) => chunks.push(t));
    expect(chunks).toEqual(["née €"]);
    expect(reply.type).toBe("error");
  });

  it("bounds the whole forward: a peer trickling chunks forever times out", async () => {
    const url = await rawPeer((_req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      const t = setInterval(() => res.write(`${JSON.stringify({ t: "chunk", text: "." })}\n`), 20);
      res.on("close", () => clearInterval(t));
    });
    const c = client(insecureAuth("A"), { forwardTotalMs: 300 }, "http");
    c.setPeer("B", url);
    const t0 = performance.now();
    const err = await c.forward("B", fwd("A-1"), () => {}).catch((e) => e);
    expect((err as TransportError).kind).toBe("timeout");
    // The trickle never ends: any bound shows the total timeout; generous for a busy machine.
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  it("times out a silent peer between chunks", async () => {
    const url = await rawPeer((_req, res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(`${JSON.stringify({ t: "chunk", text: "a" })}\n`);
      // then silence
    });
    const c = client(insecureAuth("A"), { gapMs: 200 }, "http");
    c.setPeer("B", url);
    const err = await c.forward("B", fwd("A-1"), () => {}).catch((e) => e);
    expect((err as TransportError).kind).toBe("timeout");
  });
});
