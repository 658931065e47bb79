/**
 * A cut-off hello is checked for TLS (wrong-port.ts) only at the address the operator gave for the
 * peer: an address held from gossip is a peer's say, and must draw no connection of the check.
 */
import { mkdtempSync, readFileSync } from "node:fs";
import { createServer as createNetServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createServer as createTlsServer } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initCa, issueNodeCert, nodePaths } from "../../src/net/auth/ca.js";
import { insecureAuth } from "../../src/net/transport-auth.js";
import { PeerClient, TransportError } from "../../src/net/transport-client.js";
import { speaksTls } from "../../src/net/wrong-port.js";

let tlsServer: Server;
/** Connections the TLS server took: a plain hello's, plus one per TLS check. */
let connections = 0;
let tlsUrl = "";
/** An address with nothing listening: the operator's, which gossip moved the peer away from. */
let closedUrl = "";

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), "hello-tls-check-"));
  await initCa(dir, { clusterId: "hello-tls-check" });
  await issueNodeCert(dir, "T");
  const paths = nodePaths(dir, "T");
  tlsServer = createTlsServer({ cert: readFileSync(paths.cert), key: readFileSync(paths.key) });
  tlsServer.on("connection", () => connections++);
  // A plain request read as TLS fails its handshake: the socket is cut off without an answer.
  tlsServer.on("tlsClientError", () => {});
  await new Promise<void>((r) => tlsServer.listen(0, "127.0.0.1", r));
  tlsUrl = `http://127.0.0.1:${(tlsServer.address() as { port: number }).port}`;
  const spare = createNetServer();
  await new Promise<void>((r) => spare.listen(0, "127.0.0.1", r));
  closedUrl = `http://127.0.0.1:${(spare.address() as { port: number }).port}`;
  await new Promise<void>((r) => spare.close(() => r()));
}, 60_000);

afterAll(async () => {
  await new Promise<void>((r) => tlsServer?.close(() => r()));
});

/** The error of `id`'s hello through a fresh client holding `heldUrl`, and the connections it drew. */
async function cutOffHello(
  heldUrl: string,
  operatorUrl?: string,
): Promise<{ err: TransportError; drew: number }> {
  const c = new PeerClient({ auth: insecureAuth("A"), timeouts: { connectMs: 5_000 } });
  try {
    c.setPeer("B", heldUrl);
    const before = connections;
    const err = await c.hello("B", operatorUrl).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(TransportError);
    return { err: err as TransportError, drew: connections - before };
  } finally {
    await c.close();
  }
}

describe("the TLS check of a cut-off hello", () => {
  it("runs at the operator's address: says it speaks TLS", async () => {
    const { err, drew } = await cutOffHello(tlsUrl, tlsUrl);
    expect(err.message).toMatch(/speaks TLS, but its URL is http:\/\//);
    expect(err.wrongAddress).toBe(true);
    expect(drew).toBe(2);
  });

  it("does not run at an address learned from gossip (no operator address)", async () => {
    const { err, drew } = await cutOffHello(tlsUrl);
    expect(err.kind).toBe("connection");
    expect(err.message).not.toMatch(/speaks TLS/);
    expect(err.wrongAddress).toBe(false);
    expect(drew).toBe(1);
  });

  it("does not run where gossip moved a configured peer: only the operator's address is checked", async () => {
    const { err, drew } = await cutOffHello(tlsUrl, closedUrl);
    expect(err.message).not.toMatch(/speaks TLS/);
    expect(err.wrongAddress).toBe(false);
    expect(drew).toBe(1);
  });

  it("answers no, not a throw, for an address node:tls refuses outright", async () => {
    await expect(speaksTls("127.0.0.1", 70_000, 1_000)).resolves.toBe(false);
  });
});
