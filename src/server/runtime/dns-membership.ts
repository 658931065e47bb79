/**
 * Peers from DNS (`--peers-dns name[:port]`), kept in step with the node's membership.
 *
 * DNS gives addresses, not ids. Each new address is asked who it is (`GET /peer/hello` on a one-off
 * connection; mTLS: any certificate of the cluster CA, whose id must equal the announced one) and the
 * answer is checked with `checkPeerHello` (same cluster, model and gossip mode, a protocol version both
 * speak, not ourselves). Accepted → a pool pinned to that id + `addPeer`. An address that leaves DNS →
 * `removePeer` (unless another address still announces the same id: then the peer just moves there). Every
 * round, each DNS peer is asked again over its pinned pool; when that fails, a one-off probe tells whether
 * the address now answers with another id (a replaced node on a reused address) → the old id is removed,
 * the new one admitted. Refused or unreachable addresses are retried the same way. Static peers win over DNS:
 * an address that announces a static peer's id is ignored.
 */
import { readFile, stat } from "node:fs/promises";
import { z } from "zod";
import {
  checkPeerHello,
  DiscoveryError,
  DnsPeerDiscovery,
  type DnsTarget,
  type HelloExpectation,
  type PeerAddress,
  type Resolver,
} from "../../net/discovery.js";
import type { PeerHello } from "../../net/wire-schemas.js";
import type { RuntimeLogger } from "./logger.js";

/** What this module needs from the transport (PeerClient) and the runtime (NodeRuntime). */
export interface DnsMembershipPorts {
  probeHello(url: string): Promise<{ hello: unknown; certId: string | undefined }>;
  /**
   * Hello over the member's pinned pool, unchecked: it must still pass `checkPeerHello` as the same id.
   * `url`: the DNS entry's own address (a cut-off hello there is checked for TLS, not elsewhere).
   */
  hello(id: string, url: string): Promise<unknown>;
  hasPeer(id: string): boolean;
  isStatic(id: string): boolean;
  addPeer(id: string, url: string, hello: PeerHello): boolean;
  /** A member's re-checked hello (its engine may have changed: whether forwards carry the text). */
  noteHello(id: string, hello: PeerHello): void;
  movePeer(id: string, url: string): void;
  removePeer(id: string, why: string): void;
}

export interface DnsMembershipOptions {
  target: DnsTarget;
  scheme: "http" | "https";
  resolver: Resolver;
  intervalMs: number;
  expect: Omit<HelloExpectation, "peerId">;
  ports: DnsMembershipPorts;
  logger: RuntimeLogger;
}

type Status = "probing" | "peer" | "alias" | "self" | "static" | "refused" | "full" | "unreachable";

interface Entry {
  address: PeerAddress;
  status: Status;
  /** The id it announced (peer, alias, static). */
  id: string | undefined;
  /** Last reason it is not a peer (refused/full/unreachable), logged once per change. */
  why: string | undefined;
  busy: boolean;
  /** A member's hello is being asked (recheck): one at a time, however often its restarts are told. */
  checking: boolean;
  /**
   * A restart told while a check was running (whose hello may be the previous life's): one more check
   * once that one ends, however many were told meanwhile.
   */
  again: boolean;
}

export class DnsMembership {
  private readonly entries = new Map<string, Entry>();
  private readonly discovery: DnsPeerDiscovery;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private verifying = false;
  private emptyRounds = 0;
  /** The newest epoch each member's snapshots said (members only: dropped with the member). */
  private readonly epochs = new Map<string, number>();

  constructor(private readonly o: DnsMembershipOptions) {
    this.discovery = new DnsPeerDiscovery({
      target: o.target,
      scheme: o.scheme,
      resolver: o.resolver,
      intervalMs: o.intervalMs,
      onChange: (c) => this.onChange(c.added, c.removed),
      onError: (err) => o.logger.warn({ err: err.message, name: o.target.host }, "peer DNS lookup failed"),
      onRound: (addresses) => this.noteRound(addresses),
    });
  }

  /**
   * A name without addresses means no peers (a Service before its first pod), so it is no error; but
   * a mistyped name would leave the node alone without a word: said at once, then about once a minute.
   */
  private noteRound(addresses: number): void {
    if (addresses > 0) {
      this.emptyRounds = 0;
      return;
    }
    const every = Math.max(1, Math.round(60_000 / this.o.intervalMs));
    if (this.emptyRounds++ % every !== 0) return;
    this.o.logger.warn(
      { name: this.o.target.host, emptyLookups: this.emptyRounds },
      `peer DNS name has no address (yet); looking again every ${this.o.intervalMs / 1000} s`,
    );
  }

  /** First resolve (and the probes it starts) now, then every interval. */
  async start(): Promise<void> {
    await this.discovery.start();
    this.timer = setInterval(() => void this.verify(), this.o.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    this.discovery.stop();
    clearInterval(this.timer);
  }

  /**
   * Told the epoch of each snapshot a peer sends of itself: a member seen restarted (a newer epoch)
   * has its hello read again now, not at the next round — the process behind the address may serve
   * another model or cluster now (as static-peer-checks.ts does for static peers); one told while its
   * check runs is read once that check ends (`again`).
   */
  sawEpoch(id: string, epoch: number): void {
    if (this.stopped || !Number.isSafeInteger(epoch)) return;
    const e = [...this.entries.values()].find((x) => x.status === "peer" && x.id === id);
    if (e === undefined) return;
    const seen = this.epochs.get(id);
    if (seen !== undefined && epoch <= seen) return;
    this.epochs.set(id, epoch);
    if (seen === undefined) return;
    if (e.busy || e.checking) {
      e.again = true;
      return;
    }
    this.o.logger.info(
      { peer: id, epoch, address: e.address.url },
      "DNS peer restarted: reading its hello again",
    );
    void this.recheck(e);
  }

  /** Address → status, for /cluster and tests. */
  view(): { url: string; status: Status; id: string | undefined }[] {
    return [...this.entries.values()].map((e) => ({ url: e.address.url, status: e.status, id: e.id }));
  }

  private onChange(added: PeerAddress[], removed: PeerAddress[]): void {
    if (this.stopped) return;
    for (const a of removed) {
      const e = this.entries.get(a.url);
      if (!e) continue;
      this.entries.delete(a.url);
      if (e.status === "peer" && e.id !== undefined) this.drop(e.id, "address left DNS");
    }
    for (const a of added) {
      if (this.entries.has(a.url)) continue;
      const e: Entry = {
        address: a,
        status: "probing",
        id: undefined,
        why: undefined,
        busy: false,
        checking: false,
        again: false,
      };
      this.entries.set(a.url, e);
      void this.probe(e);
    }
  }

  /** The peer `id` lost its address: move it to another address announcing it, else remove it. */
  private drop(id: string, why: string): void {
    this.epochs.delete(id);
    for (const other of this.entries.values()) {
      if (other.status === "alias" && other.id === id) {
        other.status = "peer";
        this.o.ports.movePeer(id, other.address.url);
        return;
      }
    }
    this.o.ports.removePeer(id, why);
  }

  /** Asks the address who it is and admits it if it passes; the next round retries otherwise. */
  private async probe(e: Entry): Promise<void> {
    if (e.busy) return;
    e.busy = true;
    try {
      let r: Awaited<ReturnType<DnsMembershipPorts["probeHello"]>>;
      try {
        r = await this.o.ports.probeHello(e.address.url);
      } catch (err) {
        // A member that is merely down stays a member: liveness is the failure detector's business.
        if (e.status !== "peer") this.settle(e, "unreachable", undefined, (err as Error).message);
        return;
      }
      if (this.stopped || this.entries.get(e.address.url) !== e) return;
      const check = checkPeerHello({ ...this.o.expect, peerId: r.certId }, r.hello);
      if (!check.ok) {
        if (e.status === "peer" && e.id !== undefined) this.drop(e.id, check.message);
        this.settle(e, check.reason === "self" ? "self" : "refused", undefined, check.message);
        return;
      }
      const id = check.hello.id;
      if (e.status === "peer" && e.id === id) return;
      if (e.status === "peer" && e.id !== undefined) this.drop(e.id, `address now answers as '${id}'`);
      this.admit(e, check.hello);
    } finally {
      e.busy = false;
      this.checkAgain(e);
    }
  }

  private admit(e: Entry, hello: PeerHello): void {
    const { id } = hello;
    if (this.o.ports.isStatic(id)) {
      this.settle(e, "static", id, `announces static peer '${id}'; the static entry is kept`);
      return;
    }
    if (this.o.ports.hasPeer(id)) {
      // Another address of the same node (e.g. its A and AAAA records): a spare if that one leaves.
      this.settle(e, "alias", id, `another address of peer '${id}'`);
      return;
    }
    if (!this.o.ports.addPeer(id, e.address.url, hello)) {
      this.settle(e, "full", id, "membership is full (--max-peers)");
      return;
    }
    e.status = "peer";
    e.id = id;
    e.why = undefined;
  }

  private settle(e: Entry, status: Status, id: string | undefined, why: string): void {
    const changed = e.status !== status || e.why !== why;
    e.status = status;
    e.id = id;
    e.why = why;
    if (!changed) return;
    const log = { address: e.address.url, status, ...(id !== undefined ? { peer: id } : {}), why };
    if (status === "refused" || status === "full") this.o.logger.warn(log, "DNS address not admitted");
    else this.o.logger.debug(log, "DNS address not admitted");
  }

  /**
   * One round: members are asked over their pinned pool whether they still are who they were; an
   * address that fails that, or is not a member yet, is probed afresh.
   */
  private async verify(): Promise<void> {
    if (this.verifying || this.stopped) return;
    this.verifying = true;
    try {
      await Promise.all([...this.entries.values()].map((e) => this.recheck(e)));
    } finally {
      this.verifying = false;
    }
  }

  /** A member asked whether it still is who it was (else probed afresh); any other address probed. */
  private async recheck(e: Entry): Promise<void> {
    if (e.busy || e.checking || e.status === "self" || e.status === "static" || e.status === "alias") return;
    if (e.status === "peer" && e.id !== undefined) {
      e.checking = true;
      try {
        const check = checkPeerHello(
          { ...this.o.expect, peerId: e.id },
          await this.o.ports.hello(e.id, e.address.url),
        );
        if (check.ok) {
          this.o.ports.noteHello(e.id, check.hello);
          return;
        }
        // Another id, cluster, model or protocol behind the address now: probed afresh below.
      } catch {
        // Down, or another node behind the address (its certificate no longer names e.id).
      } finally {
        e.checking = false;
        this.checkAgain(e);
      }
    }
    if (this.entries.get(e.address.url) === e) await this.probe(e);
  }

  /** A restart told during the check or probe just ended: checked now, not at the next round. */
  private checkAgain(e: Entry): void {
    if (!e.again) return;
    e.again = false;
    if (this.stopped || this.entries.get(e.address.url) !== e || e.status !== "peer") return;
    queueMicrotask(() => void this.recheck(e));
  }
}

/** Bounded: the file is read on every round. */
const MAX_FILE_BYTES = 1024 * 1024;
const addressFileSchema = z.record(z.string().max(253), z.array(z.string().max(64)).max(4096));

/**
 * A resolver answering from a JSON file `{"name": ["127.0.0.2", …]}` re-read on every look-up (a name
 * that is absent has no records). For tests on loopback, and for environments that publish peer
 * addresses as a file rather than in DNS.
 */
export function fileResolver(path: string): Resolver {
  return async (host) => {
    const st = await stat(path);
    if (st.size > MAX_FILE_BYTES) throw new DiscoveryError(`${path} is larger than 1 MiB`);
    let json: unknown;
    try {
      json = JSON.parse(await readFile(path, "utf8"));
    } catch (err) {
      throw new DiscoveryError(`${path} is not valid JSON: ${(err as Error).message}`);
    }
    const r = addressFileSchema.safeParse(json);
    if (!r.success) throw new DiscoveryError(`${path} must map names to lists of addresses`);
    return r.data[host] ?? [];
  };
}
