/**
 * Which client a connection counts against for per-address bounds. An IPv4 address is one client,
 * also when it arrives IPv4-mapped on a dual-stack socket (`::ffff:192.0.2.1` is 192.0.2.1). An IPv6
 * client counts by its /64: a host is normally given a whole /64 and can pick any address in it, so
 * counting each address alone would give one client 2^64 shares. Loopback `::1` is its own client.
 */
import { isIPv4, isIPv6 } from "node:net";

/** The /64 every IPv6 client is grouped by. */
export const IPV6_CLIENT_PREFIX_BITS = 64;

export function clientAddressKey(address: string | undefined): string {
  if (address === undefined || address === "") return "unknown";
  if (isIPv4(address)) return address;
  const bare = address.replace(/%.*$/, ""); // a zone id (fe80::1%eth0) names an interface, not a host
  if (!isIPv6(bare)) return address;
  const groups = ipv6Groups(bare);
  // ::ffff:a.b.c.d (IPv4-mapped): the IPv4 client itself.
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    const [hi = 0, lo = 0] = groups.slice(6);
    return `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  }
  if (groups.slice(0, 7).every((g) => g === 0) && groups[7] === 1) return "::1";
  const prefix = groups.slice(0, IPV6_CLIENT_PREFIX_BITS / 16).map((g) => g.toString(16));
  return `${prefix.join(":")}::/${IPV6_CLIENT_PREFIX_BITS}`;
}

/** The eight 16-bit groups of a valid IPv6 address (`::` expanded, a dotted IPv4 tail converted). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const parse = (s: string) => (s === "" ? [] : s.split(":").map((g) => Number.parseInt(g, 16)));
  const h = parse(head);
  if (tail === undefined) return h;
  const t = parse(tail);
  return [...h, ...Array.from({ length: 8 - h.length - t.length }, () => 0), ...t];
}
