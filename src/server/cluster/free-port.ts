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

function bindsNow(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(false));
    s.listen({ port, host, exclusive: true }, () => s.close(() => resolve(true)));
  });
}

export async function freePort(host: string): Promise<number> {
  const high = ephemeralLow();
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * (high - LOWEST));
    if (handedOut.has(port)) continue;
    if (await bindsNow(host, port)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new Error(`no free port on ${host} in ${LOWEST}-${high - 1} after 200 tries`);
}
