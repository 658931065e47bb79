/**
 * The peer client: one undici Pool per peer (HTTP/1.1 keep-alive), explicit timeouts on everything
 * (undici's defaults are 300 s), and failures classified so the runtime can tell the node: a refused or
 * reset connection, a timeout, a stream cut off before its final record, or an HTTP refusal.
 * Its parts: peer-pool.ts (per-peer entry and pool), hello-exchange.ts (hellos proving who answered),
 * forward-http.ts (a forward over HTTP), answer-check.ts (answers taken whole), transport-timeouts.ts,
 * channel-accept-mac.ts (whether a peer's channel 101 must carry its MAC).
 */

import type { Pool } from "undici";
import type { Snapshot } from "../core/snapshot.js";
import { encodeSnapshot } from "../core/snapshot-codec.js";
import { checkAnswer } from "./answer-check.js";
import { readBoundedBytes } from "./answer-stream.js";
import { acceptMacSeen, recheckAcceptMac } from "./channel-accept-mac.js";
import { ForwardChannel } from "./channel-client.js";
import { ConnectedPeers, DEFAULT_MAX_CONNECTED_PEERS } from "./connected-peers.js";
import { forwardOverHttp } from "./forward-http.js";
import { probeHello, verifiedHello } from "./hello-exchange.js";
import { loneMessageToWire } from "./lone-wire.js";
import { MESH_PATH } from "./mesh-wire.js";
import { openPool, type PeerEntry } from "./peer-pool.js";
import type { ProbeAddresses } from "./probe-addresses.js";
import type { PeerAuth } from "./transport-auth.js";
import { classify, TransportError } from "./transport-error.js";
import { DEFAULT_TIMEOUTS, type TransportTimeouts } from "./transport-timeouts.js";
import {
  type ForwardMsg,
  HELLO_PATH,
  type LoneMessage,
  PROMPT_TEXT_NEEDED,
  type ReplyMsg,
} from "./transport-wire.js";
import { explainCutOff, explainForeignCert } from "./wrong-port.js";

export {
  CHANNEL_ACCEPT_REFUSED,
  classify,
  TransportError,
  type TransportFailure,
} from "./transport-error.js";
export type { TransportTimeouts } from "./transport-timeouts.js";

export interface PeerClientOptions {
  auth: PeerAuth;
  timeouts?: Partial<TransportTimeouts>;
  /** Delay injection (Δcomm) applied before every outgoing peer message. */
  delay?: () => Promise<void>;
  /**
   * How forwards travel: multiplexed on one WebSocket per peer ("channel", the default: a frame round
   * trip instead of an HTTP exchange per forward), or one HTTP request each ("http").
   */
  forwardTransport?: ForwardTransport;
  /** Peers kept connected at most (connected-peers.ts); default DEFAULT_MAX_CONNECTED_PEERS. */
  maxConnectedPeers?: number;
}

export type ForwardTransport = "channel" | "http";

export { PEER_POOL_CONNECTIONS } from "./peer-pool.js";

export class PeerClient {
  private readonly peers = new Map<string, PeerEntry>();
  private readonly t: TransportTimeouts;
  private readonly connected: ConnectedPeers;

  constructor(private readonly opts: PeerClientOptions) {
    this.t = { ...DEFAULT_TIMEOUTS, ...opts.timeouts };
    this.connected = new ConnectedPeers(opts.maxConnectedPeers ?? DEFAULT_MAX_CONNECTED_PEERS);
  }

  /** The security mode this client's requests run in. */
  get authMode(): PeerAuth["mode"] {
    return this.opts.auth.mode;
  }

  /** Peers we hold connections to (or may: a pool made and not yet closed). */
  get connectedPeers(): number {
    return this.connected.size;
  }

  setPeer(id: string, url: string): void {
    const key = id;
    const existing = this.peers.get(key);
    if (existing?.url === url) return;
    if (existing) {
      existing.channel?.close();
      void existing.pool?.close().catch(() => {});
      this.connected.drop(key);
    }
    // A member moving to another address keeps what its hello said.
    const entry: PeerEntry = {
      id,
      url,
      pool: undefined,
      connector: undefined,
      channel: undefined,
      promptText: existing?.promptText ?? true,
      acceptMac: existing?.acceptMac ?? true,
      acceptMacCheckedAt: existing?.acceptMacCheckedAt,
      acceptMacSeenAt: existing?.acceptMacSeenAt,
    };
    if ((this.opts.forwardTransport ?? "channel") === "channel")
      entry.channel = new ForwardChannel(
        key,
        url,
        this.opts.auth,
        this.t,
        () => entry.acceptMac,
        () =>
          recheckAcceptMac(
            key,
            entry,
            (i) => this.peers.get(i),
            (i) => this.verifiedHello(i),
          ),
        () => acceptMacSeen(this.peers.get(key)),
      );
    this.peers.set(key, entry);
  }

  /** The peer's pool, made if it has none, and the peer marked used: the least recent past the bound go. */
  private poolOf(peer: PeerEntry): Pool {
    this.use(peer);
    if (peer.pool) return peer.pool;
    return openPool(peer, this.opts.auth, this.t);
  }

  /**
   * `peer` is used now; peers past the bound are released: their pools closed (requests in flight
   * finish first) and their channels closed if no forward is open on them (one that is stays, and is
   * offered again at the next use).
   */
  private use(peer: PeerEntry): void {
    for (const id of this.connected.use(peer.id)) {
      const p = this.peers.get(id);
      if (p?.channel && !p.channel.release()) continue;
      if (p?.pool) void p.pool.close().catch(() => {});
      if (p) p.pool = undefined;
      this.connected.drop(id);
    }
  }

  /** Whether forwards to `id` carry the prompt text: what the peer's (checked) hello said. */
  setPromptText(id: string, needed: boolean): void {
    const p = this.peers.get(id);
    if (p) p.promptText = needed;
  }

  /**
   * Whether the peer's (checked) hello said its channel's 101 answer carries a channel MAC. A hello is
   * itself authenticated (response MAC, or TLS), so no one on the path can take that claim away.
   */
  setChannelAcceptMac(id: string, sealed: boolean): void {
    const p = this.peers.get(id);
    if (p) p.acceptMac = sealed;
  }

  /** True unless the peer's hello said its engine runs from tokens alone. */
  sendsPromptText(id: string): boolean {
    return this.peers.get(id)?.promptText ?? true;
  }

  removePeer(id: string): void {
    const p = this.peers.get(id);
    if (!p) return;
    this.peers.delete(id);
    this.connected.drop(id);
    p.channel?.close();
    void p.pool?.destroy().catch(() => {});
  }

  has(id: string): boolean {
    return this.peers.has(id);
  }

  /**
   * What the peer answers on `GET /peer/hello`, unchecked: `checkPeerHello` decides, so a malformed
   * answer is refused with its reason rather than retried as a transport error.
   * `operatorUrl`: the address the operator gave for `id` (a static peer's, a DNS entry's own). Only a
   * hello sent to that very address has a cut-off checked for TLS (wrong-port.ts): one `id` holds from
   * gossip is a peer's say, and a peer must not aim this node's TLS connections at an address.
   */
  async hello(id: string, operatorUrl?: string): Promise<unknown> {
    const url = this.peers.get(id)?.url;
    const checkTls = url !== undefined && url === operatorUrl;
    const body = await this.exchange(id, "GET", HELLO_PATH, undefined, {}).catch(async (err: unknown) => {
      // An http:// peer URL at a TLS port is cut off without a word: said plainly (wrong-port.ts).
      // A certificate that names no node there: a service that is no member, not another CA's.
      throw !checkTls || !(err instanceof TransportError)
        ? err
        : await explainForeignCert(url, await explainCutOff(url, err, this.t.connectMs), this.t.connectMs);
    });
    try {
      return JSON.parse(body.toString("utf8"));
    } catch {
      throw new TransportError("protocol", `peer ${id}: hello is not JSON`);
    }
  }

  /**
   * The hello of `id` at its registered address, with proof that `id` answered it: over mutual TLS
   * the connection is pinned to `id`'s certificate from the cluster CA; with a shared secret the answer
   * carries an HMAC over a fresh challenge (hmac.ts, helloProof). Rejects with a TransportError
   * "protocol" ("proof") when the proof is missing or wrong: whoever answered is not `id` of ours.
   */
  verifiedHello(id: string): Promise<unknown> {
    let peer: PeerEntry;
    try {
      peer = this.get(id);
    } catch (err) {
      return Promise.reject(err);
    }
    return verifiedHello(this.opts.auth, this.t, id, () => this.poolOf(peer));
  }

  /** A mesh message's body (mesh-wire.ts) to `id`, best effort; resolves once the peer took it. */
  async sendMesh(id: string, body: Uint8Array): Promise<void> {
    await this.exchange(id, "POST", MESH_PATH, body, { "content-type": "application/octet-stream" });
  }

  /**
   * Asks an address that is not a peer yet who it is (`GET /peer/hello`, signed in shared-secret
   * mode), on a one-off connection: DNS gives addresses, not ids, so the TLS check cannot be pinned to
   * an id yet — it only requires a certificate from the cluster CA, and reports the id that
   * certificate names (`certId`) so the caller can hold the announced id against it. Returns the raw
   * answer (validate it with `checkPeerHello`). `seen`, if given, gets what the URL's host resolved to
   * and which address answered (probe-addresses.ts).
   */
  probeHello(url: string, seen?: ProbeAddresses): Promise<{ hello: unknown; certId: string | undefined }> {
    return probeHello(this.opts.auth, this.t, url, seen);
  }

  /**
   * Sends a message on its own request (anything but a forward: `forward` streams its answer) and
   * resolves with the size of its body once the peer has taken it. A round hands every peer the same
   * snapshot object (one full, one delta per base, one heartbeat): each is encoded once, not once per
   * peer.
   */
  async send(id: string, msg: LoneMessage): Promise<number> {
    // A cancel rides behind its forward on the forward's channel while that forward is open there.
    if (msg.type === "cancel" && this.peers.get(id)?.channel?.cancel(msg.reqId, msg.attempt, msg.final))
      return 0;
    const req = loneMessageToWire(msg, this.snapshotBytes);
    await this.exchange(id, "POST", req.path, req.body, req.headers);
    return req.body.byteLength;
  }

  /** Encoded bytes per snapshot object; weak, so a round's snapshots go with the round. */
  private readonly encoded = new WeakMap<Snapshot, Uint8Array>();

  private readonly snapshotBytes = (s: Snapshot): Uint8Array => {
    let bytes = this.encoded.get(s);
    if (bytes === undefined) {
      bytes = encodeSnapshot(s);
      this.encoded.set(s, bytes);
    }
    return bytes;
  };

  /**
   * Sends a forward and streams the answer: `onChunk` for each output piece, resolving with the final
   * result/error message. Rejects with TransportError if the stream breaks before its final record.
   */
  forward(
    id: string,
    msg: ForwardMsg,
    onChunk: (text: string) => void,
    /**
     * The peer accepted the forward (its ack, first chunk, or — over HTTP — response headers), in
     * `epoch` when its ack said one.
     */
    onAck?: (epoch?: number) => void,
  ): Promise<ReplyMsg> {
    let peer: PeerEntry;
    try {
      peer = this.get(id);
    } catch (err) {
      return Promise.reject(err);
    }
    // The usual case goes straight on: no wrapping promise on the per-forward path.
    // Tokens of another model's tokenizer are for routing only: the peer tokenizes the text again.
    if (peer.promptText || msg.request.tokenizer !== undefined)
      return this.forwardOnce(id, peer, msg, onChunk, onAck, true);
    return this.forwardTokensOnly(id, peer, msg, onChunk, onAck);
  }

  /** A forward without the prompt text; re-sent with it if the peer's engine turns out to need it. */
  private async forwardTokensOnly(
    id: string,
    peer: PeerEntry,
    msg: ForwardMsg,
    onChunk: (text: string) => void,
    onAck: ((epoch?: number) => void) | undefined,
  ): Promise<ReplyMsg> {
    const reply = await this.forwardOnce(id, peer, msg, onChunk, onAck, false);
    if (reply.type !== "error" || reply.error !== PROMPT_TEXT_NEEDED) return reply;
    // The peer's engine now needs the text (it came back under the same id with another engine): say
    // so for good and send the same forward again, text included — it never reached the peer's node.
    // Over HTTP the refused copy's 200 has already acked; a channel refusal carries no ack.
    peer.promptText = true;
    return this.forwardOnce(id, peer, msg, onChunk, peer.channel ? onAck : undefined, true);
  }

  private async forwardOnce(
    id: string,
    peer: PeerEntry,
    msg: ForwardMsg,
    onChunk: (text: string) => void,
    onAck: ((epoch?: number) => void) | undefined,
    withText: boolean,
  ): Promise<ReplyMsg> {
    if (this.opts.delay) await this.opts.delay();
    if (peer.channel) {
      this.use(peer);
      try {
        return await peer.channel.forward(msg, onChunk, onAck, withText);
      } catch (err) {
        // A peer without a channel endpoint (an older version) is served over HTTP from now on.
        if (!(err instanceof TransportError && err.kind === "http" && err.status === 404)) throw err;
        peer.channel.close();
        peer.channel = undefined;
      }
    }
    return await forwardOverHttp(
      this.opts.auth,
      this.t,
      id,
      peer.id,
      () => this.poolOf(peer),
      msg,
      onChunk,
      onAck,
      withText,
    );
  }

  async close(): Promise<void> {
    for (const p of this.peers.values()) p.channel?.close();
    const pools = [...this.peers.values()].map((p) => p.pool?.close().catch(() => {}));
    this.peers.clear();
    await Promise.all(pools);
  }

  private get(id: string): PeerEntry {
    const p = this.peers.get(id);
    if (!p) throw new TransportError("connection", `unknown peer ${id}`);
    return p;
  }

  private async exchange(
    id: string,
    method: "GET" | "POST",
    path: string,
    body: Uint8Array | undefined,
    headers: Record<string, string>,
  ): Promise<Buffer> {
    const peer = this.get(id);
    try {
      if (this.opts.delay) await this.opts.delay();
      const signed = this.opts.auth.sign({ method, path, body, to: peer.id, headers });
      const res = await this.poolOf(peer).request({
        method,
        path,
        body: body ? Buffer.from(body.buffer, body.byteOffset, body.byteLength) : undefined,
        signal: AbortSignal.timeout(this.t.messageTotalMs),
        headers: signed,
      });
      const bytes = await readBoundedBytes(res.body, 1 << 20);
      checkAnswer(`peer ${id}`, this.opts.auth, signed, res, bytes, `${path}: ${bytes.toString("utf8")}`);
      return bytes;
    } catch (err) {
      throw classify(err);
    }
  }
}
