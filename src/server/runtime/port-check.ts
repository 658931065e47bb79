/**
 * The API and peer ports tried before the engine loads: a port clash is found in a moment, not after
 * minutes of loading a large model. Each address is bound and let go at once; the servers bind again
 * once the node is built (another process could take a port in between: that bind's error is the same).
 */
import { createServer, type Server } from "node:net";
import { SettingsError, splitHostPort } from "../settings/index.js";
import { bound } from "./listen-error.js";

export interface PortToCheck {
  flag: string;
  address: string;
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/** Throws `bound`'s error naming the flag of the first address that will not bind. Port 0: no check. */
export async function checkPorts(ports: readonly PortToCheck[]): Promise<void> {
  const fixed = ports.filter((p) => splitHostPort(p.address).port !== 0);
  const [a, b] = fixed;
  if (a && b && a.address === b.address)
    throw new SettingsError(`${a.flag} and ${b.flag} are the same address ${a.address}`);
  // All held at once, so two flags naming one port clash here too.
  const held: Server[] = [];
  try {
    for (const [i, p] of fixed.entries()) {
      const { host, port } = splitHostPort(p.address);
      const server = createServer();
      await bound(p.flag, p.address, listen(server, host, port)).catch((err: { exitCode?: number }) => {
        // Held by our other flag (one port on a wildcard and a host, or two names of one host): the
        // flags must change, which "another process" and a retry (exit 1) would not say.
        const mine = fixed.slice(0, i).find((q) => splitHostPort(q.address).port === port);
        if (mine && err.exitCode === 1)
          throw new SettingsError(
            `${mine.flag} ${mine.address} and ${p.flag} ${p.address} share port ${port}`,
          );
        throw err;
      });
      held.push(server);
    }
  } finally {
    await Promise.all(held.map((s) => new Promise<void>((res) => s.close(() => res()))));
  }
}
