/**
 * Where peers come from: a static list (`--peers A=https://127.0.0.1:9001,B=…` or the config file) or
 * DNS (`--peers-dns name[:port]`: every A/AAAA record of a name, as a Kubernetes headless Service gives,
 * re-resolved periodically).
 *
 * DNS yields addresses, not ids. The flow for a DNS-found address: the transport calls
 * `GET /peer/hello` on it (over mTLS with `clientTlsOptions(m, undefined)`, or signed in shared-secret
 * mode), validates the answer with `checkPeerHello` — a malformed hello, another cluster, model or
 * `--gossip` mode, no protocol version both speak (protocol-range.ts), or our own id → the address is
 * ignored — and from then on treats it as peer `hello.id` (mTLS connections pinned to that id). An address
 * that disappears from DNS is dropped; heartbeats remain the liveness signal.
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { z } from "zod";
import { HOST_NAME, hostProblem } from "./host-port.js";
import { NODE_ID_PATTERN, nodeIdSchema } from "./node-id.js";
import { type AuthMode, BUILD_RANGE, helloRange, protocolCompatibility } from "./protocol-range.js";
import { raceTimeout } from "./time-bound.js";
import { helloSchema, type PeerHello } from "./wire-schemas.js";

export const MAX_PEERS = 256;

export class DiscoveryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DiscoveryError";
  }
}

export interface StaticPeer {
  id: string;
  /** Origin of the peer's peer port, e.g. https://127.0.0.1:9001 (no trailing slash). */
  url: string;
}

/** A peer base URL: http or https, host and optional port, nothing else. */
function parsePeerUrl(raw: string): string {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new DiscoveryError(`invalid peer URL '${raw}'`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new DiscoveryError(`peer URL '${raw}' must use http:// or https://`);
  }
  if (u.username || u.password) throw new DiscoveryError(`peer URL '${raw}' must not contain credentials`);
  if ((u.pathname !== "/" && u.pathname !== "") || u.search || u.hash) {
    throw new DiscoveryError(
      `peer URL '${raw}' must be just scheme://host:port (no path, query or fragment)`,
    );
  }
  return u.origin;
}

const staticPeerSchema = z.object({ id: nodeIdSchema, url: z.string().max(2048) });

/**
 * Parses `A=https://127.0.0.1:9001,B=https://…`. Ids must be unique and not `self`; URLs are checked
 * by parsePeerUrl. An empty string means no peers.
 */
export function parseStaticPeers(spec: string, opts: { self?: string } = {}): StaticPeer[] {
  if (spec.length > 64 * 1024) throw new DiscoveryError("--peers is too long");
  const entries = spec
    .split(",")
    .map((e) => e.trim())
    .filter((e) => e !== "");
  return validatePeers(entries.map(splitPeerEntry), opts);
}

/** One `ID=URL` entry, as `--peers` lists them. */
function splitPeerEntry(entry: string): { id: string; url: string } {
  const eq = entry.indexOf("=");
  if (eq <= 0)
    throw new DiscoveryError(`peer '${entry}' must look like ID=URL, e.g. B=https://127.0.0.1:9001`);
  return { id: entry.slice(0, eq).trim(), url: entry.slice(eq + 1).trim() };
}

/**
 * Validates peers from a config file: a list of { id, url } or of `ID=URL` strings (as `--peers` and
 * a YAML list of `join` seeds write them), or a map id → url.
 */
export function parsePeerList(value: unknown, opts: { self?: string } = {}): StaticPeer[] {
  const tooMany = peerCountProblem(value);
  if (tooMany) throw new DiscoveryError(tooMany);
  const list = z.union([z.array(z.unknown()), z.record(z.string(), z.string())]).safeParse(value);
  if (!list.success)
    throw new DiscoveryError("peers must be a list of { id, url } or of ID=URL, or a map of id: url");
  const raw = Array.isArray(list.data)
    ? list.data.map((p, i) => {
        if (typeof p === "string") {
          // An ID and a URL at their bounds fit; a longer string is no peer, and is not quoted back.
          if (p.length > 4096) throw new DiscoveryError(`peers[${i}] is longer than 4096 characters`);
          return splitPeerEntry(p.trim());
        }
        const r = staticPeerSchema.safeParse(p);
        if (!r.success) {
          const field = r.error.issues[0]?.path.join(".");
          throw new DiscoveryError(
            `peers[${i}]: ${field ? `${field} is invalid` : "not a peer"}: give { id, url } or 'ID=URL'`,
          );
        }
        return r.data;
      })
    : Object.entries(list.data).map(([id, url], i) => mapEntry(id, url, i));
  return validatePeers(raw, opts);
}

/**
 * Too many peers in a list or map of them, said before any entry is read (the settings check it too,
 * at parse): undefined when within the bound.
 */
export function peerCountProblem(value: unknown): string | undefined {
  const n = Array.isArray(value)
    ? value.length
    : value && typeof value === "object"
      ? Object.keys(value).length
      : 0;
  return n > MAX_PEERS ? `too many peers (${n}, at most ${MAX_PEERS})` : undefined;
}

/** One `id: url` of a YAML map, bounded as the list's entries are (neither quoted back when too long). */
function mapEntry(id: string, url: string, i: number): { id: string; url: string } {
  const r = staticPeerSchema.safeParse({ id, url });
  if (r.success) return r.data;
  if (r.error.issues[0]?.path[0] === "id")
    // Counted from 0, as a list's entries are (peers[0]).
    throw new DiscoveryError(`peers: key ${i} is no node id: use 1-64 characters from A-Z a-z 0-9 _ . -`);
  throw new DiscoveryError(`peers.${id}: url is invalid (at most 2048 characters): give id: url`);
}

function validatePeers(raw: readonly { id: string; url: string }[], opts: { self?: string }): StaticPeer[] {
  if (raw.length > MAX_PEERS)
    throw new DiscoveryError(`too many peers (${raw.length}, at most ${MAX_PEERS})`);
  const seen = new Set<string>();
  return raw.map(({ id, url }) => {
    if (!NODE_ID_PATTERN.test(id)) {
      throw new DiscoveryError(`invalid peer id '${id}': use 1-64 characters from A-Z a-z 0-9 _ . -`);
    }
    if (id === opts.self) throw new DiscoveryError(`peer '${id}' is this node's own id`);
    if (seen.has(id)) throw new DiscoveryError(`peer '${id}' is listed twice`);
    seen.add(id);
    return { id, url: parsePeerUrl(url) };
  });
}

export interface DnsTarget {
  host: string;
  port: number;
}

/** `--peers-dns`'s form: a name, then an optional `:port`. */
const DNS_TARGET = /^([^:]+)(?::(\d{1,5}))?$/;

/**
 * Why `--peers-dns name[:port]` is not one, if it is not. The name goes to the system resolver, which
 * (glibc) reads forms such as `0x7f000001` or `1.2.3` as addresses: refused as `--join` refuses them
 * (host-port.ts `hostProblem`).
 */
export function dnsTargetProblem(spec: string): string | undefined {
  const m = DNS_TARGET.exec(spec.trim());
  if (!m || !HOST_NAME.test(m[1] ?? "")) return "expected a DNS name with an optional :port";
  const bad = hostProblem(m[1] as string);
  if (bad !== undefined) return `host '${m[1]}' is ${bad}; expected a DNS name with an optional :port`;
  const port = m[2] === undefined ? 1 : Number(m[2]);
  return port < 1 || port > 65535 ? "port must be 1..65535" : undefined;
}

/** Parses `--peers-dns name[:port]`; the port defaults to `defaultPort` (this node's peer port). */
export function parseDnsTarget(spec: string, defaultPort: number): DnsTarget {
  const s = spec.trim();
  const bad = dnsTargetProblem(s);
  if (bad !== undefined) throw new DiscoveryError(`invalid --peers-dns '${spec}': ${bad}`);
  const m = DNS_TARGET.exec(s) as RegExpExecArray;
  const port = m[2] === undefined ? defaultPort : Number(m[2]);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new DiscoveryError(`invalid port in --peers-dns '${spec}': must be 1..65535`);
  }
  return { host: m[1] as string, port };
}

/** A peer address found by DNS; its id is unknown until it answers `GET /peer/hello`. */
export interface PeerAddress {
  address: string;
  port: number;
  /** Base URL to reach it, e.g. https://10.0.0.7:9080 or https://[fd00::7]:9080. */
  url: string;
}

/** Resolves a name to all its addresses (A and AAAA). Resolves [] when the name has none. */
export type Resolver = (host: string) => Promise<string[]>;

const NO_RECORDS = new Set(["ENOTFOUND", "ENODATA", "EAI_NONAME", "EAI_NODATA"]);

/**
 * The production resolver: the system resolver (getaddrinfo, so /etc/hosts and the cluster DNS search
 * path apply), all addresses, bounded in time. "No such name" and "no records" mean zero peers.
 */
export function systemResolver(timeoutMs = 5000): Resolver {
  return async (host) => {
    try {
      const found = await raceTimeout(lookup(host, { all: true, verbatim: true }), timeoutMs, () => {
        throw new DiscoveryError(`DNS lookup of ${host} timed out`);
      });
      return found.map((a) => a.address);
    } catch (err) {
      if (NO_RECORDS.has((err as NodeJS.ErrnoException).code ?? "")) return [];
      throw err;
    }
  };
}

export interface DnsDiscoveryOptions {
  target: DnsTarget;
  scheme: "http" | "https";
  resolver: Resolver;
  /** Re-resolve period (default 10 s). */
  intervalMs?: number;
  onChange: (change: { added: PeerAddress[]; removed: PeerAddress[] }) => void;
  /** A failed lookup keeps the current set (a DNS hiccup must not drop every peer). */
  onError?: (err: Error) => void;
  /** After every lookup that answered: how many addresses the name has now. */
  onRound?: (addresses: number) => void;
}

/**
 * Periodically resolves a name and reports which addresses appeared and disappeared. At most
 * MAX_PEERS addresses are kept (lowest first, so every node picks the same subset).
 */
export class DnsPeerDiscovery {
  private readonly peers = new Map<string, PeerAddress>();
  private timer: NodeJS.Timeout | undefined;
  private inFlight: Promise<void> | undefined;
  private readonly intervalMs: number;

  constructor(private readonly opts: DnsDiscoveryOptions) {
    this.intervalMs = opts.intervalMs ?? 10_000;
    if (!Number.isFinite(this.intervalMs) || this.intervalMs < 100) {
      throw new DiscoveryError("DNS re-resolve interval must be at least 100 ms");
    }
  }

  /** Resolves once now, then every intervalMs (the timer does not keep the process alive). */
  async start(): Promise<void> {
    if (this.timer) return;
    this.timer = setInterval(() => void this.refresh(), this.intervalMs);
    this.timer.unref();
    await this.refresh();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  current(): PeerAddress[] {
    return [...this.peers.values()];
  }

  /** One resolve round; concurrent calls share the round in flight. */
  refresh(): Promise<void> {
    this.inFlight ??= this.resolveOnce().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async resolveOnce(): Promise<void> {
    const { host, port } = this.opts.target;
    let addresses: string[];
    try {
      addresses = await this.opts.resolver(host);
    } catch (err) {
      this.opts.onError?.(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    const valid = [...new Set(addresses.filter((a) => typeof a === "string" && isIP(a) !== 0))]
      .sort()
      .slice(0, MAX_PEERS);
    const next = new Map<string, PeerAddress>();
    for (const address of valid) {
      const hostPart = isIP(address) === 6 ? `[${address}]` : address;
      next.set(address, { address, port, url: `${this.opts.scheme}://${hostPart}:${port}` });
    }
    const added = [...next.values()].filter((p) => !this.peers.has(p.address));
    const removed = [...this.peers.values()].filter((p) => !next.has(p.address));
    this.peers.clear();
    for (const [k, v] of next) this.peers.set(k, v);
    this.opts.onRound?.(next.size);
    if (added.length === 0 && removed.length === 0) return;
    try {
      this.opts.onChange({ added, removed });
    } catch (err) {
      // Runs from a timer: a throwing listener must not become an unhandled rejection.
      this.opts.onError?.(err instanceof Error ? err : new Error(String(err)));
    }
  }
}

export interface HelloExpectation {
  /** This node's cluster id and model: a peer must match both (any model, when undefined: mixed meshes). */
  cluster: string;
  model?: string | undefined;
  /** This node's id: an address that turns out to be ourselves is skipped. */
  self: string;
  /** The id we dialled (static peers) or the id in the peer's certificate; undefined for DNS-found peers. */
  peerId?: string | undefined;
  /** The security mode the wire runs in: which protocol versions are safe (protocol-range.ts). */
  authMode: AuthMode;
  /** This node's `--gossip` mode: a peer announcing another is refused (one that says none is not). */
  gossip?: "full" | "scuttlebutt" | undefined;
}

export type HelloCheck =
  | { ok: true; hello: PeerHello }
  | {
      ok: false;
      reason:
        | "malformed"
        | "self"
        | "wrong-id"
        | "wrong-cluster"
        | "wrong-model"
        | "wrong-protocol"
        | "wrong-gossip";
      message: string;
    };

/** Decides whether a hello answer makes this address a peer. Pure; the transport acts on the result. */
export function checkPeerHello(expected: HelloExpectation, hello: unknown): HelloCheck {
  const parsed = helloSchema.safeParse(hello);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      ok: false,
      reason: "malformed",
      message: `malformed hello: ${issue?.path.join(".") || "body"}: ${issue?.message ?? "invalid"}`,
    };
  }
  const h = parsed.data;
  if (h.id === expected.self)
    return { ok: false, reason: "self", message: "the address is this node itself" };
  if (expected.peerId !== undefined && h.id !== expected.peerId) {
    return {
      ok: false,
      reason: "wrong-id",
      message: `peer announced id '${h.id}', expected '${expected.peerId}'`,
    };
  }
  if (h.cluster !== expected.cluster) {
    return {
      ok: false,
      reason: "wrong-cluster",
      message: `peer '${h.id}' belongs to cluster '${h.cluster}', not '${expected.cluster}'`,
    };
  }
  if (expected.model !== undefined && h.model !== expected.model) {
    return {
      ok: false,
      reason: "wrong-model",
      message: `peer '${h.id}' serves model '${h.model}', not '${expected.model}'`,
    };
  }
  const versions = protocolCompatibility(expected.authMode, BUILD_RANGE, helloRange(h));
  if (!versions.ok)
    return { ok: false, reason: "wrong-protocol", message: `peer '${h.id}' ${versions.message}` };
  if (expected.gossip !== undefined && h.gossip !== undefined && h.gossip !== expected.gossip) {
    return {
      ok: false,
      reason: "wrong-gossip",
      message: `peer '${h.id}' runs --gossip ${h.gossip}, this node ${expected.gossip}: set the same mode on every node`,
    };
  }
  return { ok: true, hello: h };
}
