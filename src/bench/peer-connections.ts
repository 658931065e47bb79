/**
 * What `--max-connected-peers` costs when it is below the set of peers a node talks to: one client
 * sends small mesh messages to random peers of 16 (peer servers in this process, mutual TLS or the
 * shared secret), with the bound above 16 (every pool kept) and below it (pools closed and made again,
 * TLS sessions resumed). Reported side by side: CPU per message (client and servers together), wall
 * time per message, new connections and TLS sessions resumed.
 * Run: npm run build && node dist/bench/peer-connections.js (PEER_CONN_MESSAGES, PEER_CONN_BOUNDS="4096,4").
 */
import { mkdtemp, rm } from "node:fs/promises";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import { initCa, issueNodeCert } from "../net/auth/ca.js";
import { loadTlsMaterial } from "../net/auth/tls.js";
import type { PeerServerHandlers } from "../net/peer-handlers.js";
import { hmacAuth, mtlsAuth, type PeerAuth } from "../net/transport-auth.js";
import { PeerClient } from "../net/transport-client.js";
import { buildPeerServer } from "../net/transport-server.js";
import { PROTOCOL_VERSION } from "../net/transport-wire.js";

const PEERS = 16;
const CONCURRENCY = 4;

interface Row {
  mode: string;
  bound: number;
  cpuUsPerMsg: number;
  wallUsPerMsg: number;
  connections: number;
  resumed: number;
  failures: number;
}

async function run(mode: "mtls" | "hmac", bounds: number[], messages: number): Promise<Row[]> {
  const dir = await mkdtemp(join(tmpdir(), "peer-conn-"));
  const secret = Buffer.alloc(32, 3);
  const ids = ["A", ...Array.from({ length: PEERS }, (_, i) => `P${i}`)];
  const authOf = async (id: string): Promise<PeerAuth> =>
    mode === "mtls" ? mtlsAuth(await loadTlsMaterial(dir, id)) : hmacAuth(id, secret);
  if (mode === "mtls") {
    await initCa(dir);
    for (const id of ids) await issueNodeCert(dir, id);
  }
  let connections = 0;
  let resumed = 0;
  const servers = [];
  const urls: string[] = [];
  for (const id of ids.slice(1)) {
    const handlers = {
      hello: () => ({ id, cluster: "c", model: "m", protocol: PROTOCOL_VERSION }),
      isKnownPeer: () => true,
      onMessage() {},
      onMesh() {},
      onForward() {},
    } as unknown as PeerServerHandlers;
    const s = buildPeerServer({ auth: await authOf(id), handlers });
    s.server.on(mode === "mtls" ? "secureConnection" : "connection", (t: Socket | TLSSocket) => {
      connections++;
      if ("isSessionReused" in t && t.isSessionReused()) resumed++;
    });
    servers.push(s);
    urls.push(await s.listen({ host: "127.0.0.1", port: 0 }));
  }
  const rows: Row[] = [];
  const auth = await authOf("A");
  for (const bound of bounds) {
    const c = new PeerClient({ auth, maxConnectedPeers: bound });
    for (const [i, id] of ids.slice(1).entries()) c.setPeer(id, urls[i] as string);
    for (const id of ids.slice(1)) await c.sendMesh(id, new Uint8Array(40));
    let seed = 1;
    const rnd = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    connections = 0;
    resumed = 0;
    let failures = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < messages; i += CONCURRENCY)
      await Promise.all(
        Array.from({ length: CONCURRENCY }, () =>
          c.sendMesh(`P${Math.floor(rnd() * PEERS)}`, new Uint8Array(40)).catch(() => failures++),
        ),
      );
    const cpu = process.cpuUsage(cpu0);
    rows.push({
      mode,
      bound,
      cpuUsPerMsg: (cpu.user + cpu.system) / messages,
      wallUsPerMsg: ((performance.now() - t0) * 1000) / messages,
      connections,
      resumed,
      failures,
    });
    await c.close();
  }
  for (const s of servers) await s.close();
  await rm(dir, { recursive: true, force: true });
  return rows;
}

const messages = Number(process.env.PEER_CONN_MESSAGES ?? 2000);
const bounds = (process.env.PEER_CONN_BOUNDS ?? "4096,4").split(",").map(Number);
console.log(`${messages} mesh messages (40 B) to random peers of ${PEERS}, ${CONCURRENCY} at a time`);
console.log(
  "| mode | --max-connected-peers | CPU µs/msg | wall µs/msg | new connections | TLS resumed | failures |",
);
console.log("|---|---|---|---|---|---|---|");
for (const mode of ["mtls", "hmac"] as const) {
  const rows = await run(mode, bounds, messages);
  const base = rows[0] as Row;
  for (const r of rows)
    console.log(
      `| ${r.mode} | ${r.bound} | ${r.cpuUsPerMsg.toFixed(0)} (${(r.cpuUsPerMsg / base.cpuUsPerMsg).toFixed(2)}×) | ${r.wallUsPerMsg.toFixed(0)} | ${r.connections} | ${mode === "mtls" ? r.resumed : "—"} | ${r.failures} |`,
    );
}
