/**
 * The peer-port address this node gives others (`--advertise`): with `gossip: "scuttlebutt"` it rides
 * every membership message, and members reach us there. A node behind NAT or in a container listens
 * on one address and is reached at another, so the operator may state it; a wildcard listen address
 * (0.0.0.0, ::) names no host, so the machine's first non-internal IPv4 address stands in for it
 * (memberlist's default advertise address), with the port we are bound to.
 */
import { type NetworkInterfaceInfo, networkInterfaces } from "node:os";

const WILDCARD = /^(0\.0\.0\.0|::|\[::\])$/;

export interface Advertised {
  url: string;
  /** How it was found: stated by --advertise, the bound address, or a guess for a wildcard. */
  source: "advertise" | "listen" | "interface" | "wildcard";
}

/**
 * `bound`: the peer server's URL as bound (scheme, host, port). `advertise`: HOST:PORT, validated by
 * the settings. `interfaces` is the machine's (injected for tests).
 */
export function advertisedPeerUrl(
  bound: string,
  advertise: string | undefined,
  interfaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces(),
): Advertised {
  const u = new URL(bound);
  const scheme = u.protocol.replace(/:$/, "");
  if (advertise !== undefined) return { url: `${scheme}://${advertise}`, source: "advertise" };
  if (!WILDCARD.test(u.hostname)) return { url: bound, source: "listen" };
  for (const list of Object.values(interfaces))
    for (const a of list ?? [])
      if (a.family === "IPv4" && !a.internal)
        return { url: `${scheme}://${a.address}:${u.port}`, source: "interface" };
  return { url: bound, source: "wildcard" };
}
