/** The method of a request read from raw bytes, for answers written before (or without) Node's parser. */

/** A request line: method, target, version. */
const REQUEST_LINE = /(?:^|\n)([!#$%&'*+.^_`|~0-9A-Za-z-]+) [^ \r\n]* HTTP\/[0-9.]+\r?\n/g;

/** Past this, a packet is not searched further (a request line is near its start). */
const SCAN_BYTES = 64 * 1024;

/**
 * The method of the last request whose request line is in `packet` (the one a parse error is about),
 * or undefined: a request whose headers came in several reads, or that timed out, has none here.
 */
export function methodInPacket(packet: unknown): string | undefined {
  if (!(packet instanceof Buffer)) return undefined;
  let method: string | undefined;
  for (const m of packet.toString("latin1", 0, Math.min(packet.length, SCAN_BYTES)).matchAll(REQUEST_LINE))
    method = m[1];
  return method;
}
