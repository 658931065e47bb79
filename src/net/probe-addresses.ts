/**
 * Which addresses a hello probe's host name resolved to and which one answered: an operator whose
 * node never joined through a `--join` seed sees where it actually went (`/cluster` `seeds`). The
 * probe's connector records both as it connects; nothing else changes in how it connects.
 */
import { type LookupAddress, type LookupOptions, lookup } from "node:dns";
import { isIP, type LookupFunction } from "node:net";
import { buildConnector } from "undici";

/** Addresses kept per probe: a name with more shows its first ones (a headless Service may list many). */
export const MAX_PROBE_ADDRESSES = 4;
/** Longest address kept (an IPv6 address with a zone fits; anything longer is not one). */
export const MAX_ADDRESS_CHARS = 64;

/** What one probe learned of its host's addresses (filled in as it connects). */
export interface ProbeAddresses {
  /** What the host resolved to (an address literal: itself), at most MAX_PROBE_ADDRESSES. */
  resolved: string[];
  /** The address the connection was made to; undefined if none was. */
  reached: string | undefined;
}

/** A fresh record for one probe. */
export function probeAddresses(): ProbeAddresses {
  return { resolved: [], reached: undefined };
}

/**
 * A connector for a probe of `host` that connects as undici's own would (`options`: TLS and such,
 * `timeoutMs`) and records in `seen` what the host resolved to and which address it reached.
 */
export function recordingConnector(
  host: string,
  options: buildConnector.BuildOptions | undefined,
  timeoutMs: number,
  seen: ProbeAddresses,
): buildConnector.connector {
  const literal = host.replace(/^\[(.*)\]$/, "$1");
  if (isIP(literal) !== 0) note(seen, [literal]);
  const recording = ((name: string, opts: LookupOptions, cb: (...args: unknown[]) => void) =>
    lookup(name, opts, (err, address: string | LookupAddress[], family?: number) => {
      if (!err) note(seen, Array.isArray(address) ? address.map((a) => a.address) : [address]);
      cb(err, address, family);
    })) as unknown as LookupFunction;
  const connect = buildConnector({ ...options, lookup: recording, timeout: timeoutMs });
  return (opts, cb) =>
    connect(opts, (...args) => {
      const socket = args[1];
      if (args[0] === null && socket?.remoteAddress !== undefined)
        seen.reached = boundedAddress(socket.remoteAddress);
      (cb as (...a: typeof args) => void)(...args);
    });
}

function note(seen: ProbeAddresses, addresses: readonly string[]): void {
  seen.resolved = addresses.slice(0, MAX_PROBE_ADDRESSES).map(boundedAddress);
}

/** `address` cut to MAX_ADDRESS_CHARS (with an ellipsis): it came from the resolver. */
export function boundedAddress(address: string): string {
  return address.length <= MAX_ADDRESS_CHARS ? address : `${address.slice(0, MAX_ADDRESS_CHARS - 1)}…`;
}
