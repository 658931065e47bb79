/**
 * A free TCP port to hand to a process that binds it later (a child node, a test's server).
 *
 * Asking the kernel for port 0 and closing returns a port from the ephemeral range, which every
 * outgoing connection on the machine draws its source port from: on a busy box one of them can take
 * the port before the child binds it (EADDRINUSE). So we draw below that range, where only explicit
 * binds land, check that the port binds now, and never hand the same port out twice in a process.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

const LOWEST = 10_000;
/**
 * The Fetch standard's "bad ports" at or above LOWEST: fetch (undici) refuses to connect to them
 * ("bad port"), so a node listening there could never be reached by its peers or a test's client.
 */
const FETCH_BAD_PORTS = new Set([10_080]);
const handedOut = new Set<number>();

/** The first port of the OS's ephemeral range (Linux: ip_local_port_range; elsewhere IANA's 49152). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low > LOWEST + 1_000) return low;
  } catch {
    // not Linux: fall through
  }
  return 49_152;
}

/** Undefined when `port` binds now, else the bind error. */
function bindError(host: string, port: number): Promise<NodeJS.ErrnoException | undefined> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", (err) => resolve(err));
    s.listen({ port, host, exclusive: true }, () => s.close(() => resolve(undefined)));
  });
}

// Only a taken (or forbidden) port is worth another draw; any other error — a host that does not
// resolve or is no local address — fails every port alike.
const PORT_ERRORS = new Set(["EADDRINUSE", "EACCES"]);

export async function freePort(host: string): Promise<number> {
  const high = ephemeralLow();
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * (high - LOWEST));
    if (handedOut.has(port) || FETCH_BAD_PORTS.has(port)) continue;
    const err = await bindError(host, port);
    if (err === undefined) {
      handedOut.add(port);
      return port;
    }
    if (!PORT_ERRORS.has(err.code ?? "")) throw new Error(`cannot bind ${host}: ${err.message}`);
  }
  throw new Error(`no free port on ${host} in ${LOWEST}-${high - 1} after 200 tries`);
}
