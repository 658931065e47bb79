/**
 * `HOST:PORT` as operators write addresses (`--join`, `--listen`, `--peer-listen`, `--advertise`): a
 * DNS name, an IPv4 address or a bracketed IPv6 literal, and a port 1..65535. Names follow what
 * resolvers answer, not RFC 1123's strict letters-digits-hyphens: Docker's embedded DNS resolves
 * container names such as `proj_node_1`, so `_` is a name character. IPv6 literals take hex digits
 * and colons only (plus an embedded IPv4 tail), as `isIP` decides.
 */
import { isIP } from "node:net";

/** One DNS label: letters, digits, `_` and `-`, 1..63 characters, not starting or ending with `-`. */
const LABEL = "[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?";
/** A DNS name: dot-separated labels, ≤ 253 characters, an optional final dot (fully qualified). */
export const HOST_NAME = new RegExp(`^(?=.{1,253}\\.?$)${LABEL}(?:\\.${LABEL})*\\.?$`);

/** Most `--join` seeds. */
export const MAX_SEEDS = 64;

export interface HostPort {
  /** The host as written, brackets kept for IPv6 (`[::1]`). */
  host: string;
  port: number;
}

/** Whether `host` is a DNS name, an IPv4 address or a bracketed IPv6 literal (why not, else). */
export function hostProblem(host: string): string | undefined {
  if (host.startsWith("[")) {
    const inner = host.endsWith("]") ? host.slice(1, -1) : "";
    return isIP(inner) === 6 && !inner.includes("%") ? undefined : "not an IPv6 address in brackets";
  }
  if (isIP(host) === 4) return undefined;
  if (isIP(host) === 6) return "an IPv6 address needs brackets, e.g. [::1]:9080";
  if (!HOST_NAME.test(host)) return "not a host name (letters, digits, '_', '-' and dots)";
  // A name whose last label is numeric is read as an IPv4 address by URL parsers (e.g. 1.2.3):
  // accepting it would dial an address the operator did not write.
  if (/(?:^|\.)\d+\.?$/.test(host)) return "not a valid IPv4 address";
  // So is a hex one (0x7f000001 is 127.0.0.1); `0x` alone makes the URL parser refuse the name.
  if (/(?:^|\.)0x[0-9a-f]*\.?$/i.test(host)) return "not a valid IPv4 address";
  // Whatever else a URL parser would rewrite or refuse (e.g. bad punycode) would dial, or fail at
  // start-up, as something other than what was written.
  if (urlHost(host) !== host.toLowerCase()) return "not a host name a URL takes as written";
  return undefined;
}

function urlHost(host: string): string | undefined {
  try {
    return new URL(`http://${host}`).hostname;
  } catch {
    return undefined;
  }
}

/** Parses `HOST:PORT`; returns why it is not one instead. `anyPort`: port 0 (listen on any) too. */
export function parseHostPort(s: string, anyPort = false): HostPort | string {
  const i = s.lastIndexOf(":");
  if (i <= 0) return "must be HOST:PORT";
  const host = s.slice(0, i);
  const portText = s.slice(i + 1);
  if (!/^\d{1,5}$/.test(portText)) return "must be HOST:PORT with a numeric port";
  const port = Number(portText);
  if (port > 65535 || (port === 0 && !anyPort)) return `port must be ${anyPort ? 0 : 1}..65535`;
  const bad = hostProblem(host);
  return bad === undefined ? { host, port } : `host '${host}' is ${bad}`;
}

/**
 * `--join`'s seeds (a comma-separated string or a YAML list) as `HOST:PORT` entries, deduplicated, at
 * most `max`; or why not, naming the bad entry.
 */
export function parseSeedList(
  spec: string | readonly string[],
  max = MAX_SEEDS,
): { seeds: string[] } | { error: string } {
  const items = (typeof spec === "string" ? spec.split(",") : [...spec]).map((s) => s.trim()).filter(Boolean);
  if (items.length > max) return { error: `lists ${items.length} seeds, at most ${max}` };
  for (const a of items) {
    const r = parseHostPort(a);
    if (typeof r === "string")
      return {
        // parseHostPort's "must be HOST:PORT" would only repeat the line; a host or port problem adds to it.
        error: `seed '${a}' must be HOST:PORT (a member's peer port, e.g. 10.0.0.2:9080 or proj_node_1:9080)${r === "must be HOST:PORT" ? "" : `: ${r}`}`,
      };
  }
  return { seeds: [...new Set(items)] };
}
