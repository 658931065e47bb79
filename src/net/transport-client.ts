/**
 * The peer client: one undici Pool per peer (HTTP/1.1 keep-alive), explicit timeouts on everything
 * (undici's defaults are 300 s), and failures classified so the runtime can tell the node: a refused or
 * reset connection, a timeout, a stream cut off before its final record, or an HTTP refusal.
 */

import { randomBytes } from "node:crypto";
import type { PeerCertificate } from "node:tls";
import { buildConnector, Client, Pool } from "undici";
import type { Snapshot } from "../core/snapshot.js";
import { encodeSnapshot } from "../core/snapshot-codec.js";
import { readBoundedBytes, readForwardStream } from "./answer-stream.js";
import { HEADER_CHALLENGE, HEADER_PROOF } from "./auth/hmac.js";
import { HEADER_RESPONSE_MAC } from "./auth/response-mac.js";
import { peerIdFromCert } from "./auth/tls.js";
import { ForwardChannel } from "./channel-client.js";
import { clockSkewOf, describeSkew } from "./clock-skew.js";
import { ConnectedPeers, DEFAULT_MAX_CONNECTED_PEERS } from "./connected-peers.js";
import { forwardTimeouts } from "./forward-timeouts.js";
import { MESH_PATH } from "./mesh-wire.js";
import { type ProbeAddresses, recordingConnector } from "./probe-addresses.js";
import { ANY_DESTINATION, type PeerAuth } from "./transport-auth.js";
import { classify, TransportError } from "./transport-error.js";
import {
  FORWARD_PATH,
  type ForwardMsg,
  forwardToWire,
  HELLO_PATH,
  type LoneMessage,
  loneMessageToWire,
  PROMPT_TEXT_NEEDED,
  parseEpoch,
  type ReplyMsg,
} from "./transport-wire.js";
import { helloSchema } from "./wire-schemas.js";

export interface TransportTimeouts {
  connectMs: number;
  /** Until response headers arrive (the first byte). */
  firstByteMs: number;
  /** Longest silence between body chunks of a streamed answer. */
  gapMs: number;
  /** Whole forwarded request, from send to final record. */
  forwardTotalMs: number;
  /** Whole snapshot / message / hello exchange. */
  messageTotalMs: number;
}

export {
  CHANNEL_ACCEPT_REFUSED,
  classify,
  TransportError,
  type TransportFailure,
} from "./transport-error.js";

const DEFAULT_TIMEOUTS: TransportTimeouts = {
  connectMs: 2_000,
  firstByteMs: 60_000,
  gapMs: 30_000,
  forwardTotalMs: 300_000,
  messageTotalMs: 5_000,
};

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

/** Connections in each peer's pool (snapshots, messages, hello; forwards over HTTP when so set). */
export const PEER_POOL_CONNECTIONS = 8;

interface PeerEntry {
  /** The peer's node id: what requests to it are signed for. */
  id: string;
  url: string;
  /** Its connection pool: made on first use, closed when the peer falls out of the connected ones. */
  pool: Pool | undefined;
  /**
   * How its pools connect (TLS modes), kept across pools: its TLS session cache lets a pool made again
   * after a release resume the session instead of a full handshake with certificate checks.
   */
  connector: buildConnector.connector | undefined;
  /** The forward channel, opened on first use; undefined in HTTP mode or for a peer without one. */
  channel: ForwardChannel | undefined;
  /** Forwards carry the prompt text (false once the peer's hello said its engine needs tokens only). */
  promptText: boolean;
  /**
   * Shared-secret mode: its channel's 101 answer must carry a channel MAC (auth/channel-mac.ts); false
   * once its checked hello showed a build before that MAC. Unknown (no hello noted yet): required.
   */
  acceptMac: boolean;
  /** When its hello was last read again for a 101 without the MAC (ACCEPT_MAC_RECHECK_MS apart). */
  acceptMacCheckedAt: number | undefined;
}

/**
 * A peer whose 101 came without the channel MAC although it was required is asked for its hello again
 * at most this often: its build may have changed since its hello was noted (rolled back to one before
 * the MAC, restarted without leaving), or none was noted (a static peer that never answered its first
 * check). The hello is authenticated (response MAC and proof of id), so a path that strips the MAC
 * only makes us read the peer's word again, which still says it seals its 101.
 */
export const ACCEPT_MAC_RECHECK_MS = 30_000;

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
    };
    if ((this.opts.forwardTransport ?? "channel") === "channel")
      entry.channel = new ForwardChannel(
        key,
        url,
        this.opts.auth,
        this.t,
        () => entry.acceptMac,
        () => this.recheckAcceptMac(key, entry),
      );
    this.peers.set(key, entry);
  }

  /** The peer's pool, made if it has none, and the peer marked used: the least recent past the bound go. */
  private poolOf(peer: PeerEntry): Pool {
    this.use(peer);
    if (peer.pool) return peer.pool;
    const tls = this.opts.auth.connectOptions(peer.id);
    if (tls) peer.connector ??= buildConnector({ ...tls, timeout: this.t.connectMs });
    peer.pool = new Pool(new URL(peer.url).origin, {
      connections: PEER_POOL_CONNECTIONS,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      connectTimeout: this.t.connectMs,
      headersTimeout: this.t.firstByteMs,
      bodyTimeout: this.t.gapMs,
      ...(peer.connector ? { connect: peer.connector } : {}),
    });
    return peer.pool;
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

  /**
   * The peer's 101 lacked the channel MAC we required: read its (authenticated) hello again, and take
   * its 101s unproven from now on only if that hello does not say it seals them (an older build).
   */
  private recheckAcceptMac(id: string, entry: PeerEntry): void {
    const now = Date.now();
    if (entry.acceptMacCheckedAt !== undefined && now - entry.acceptMacCheckedAt < ACCEPT_MAC_RECHECK_MS)
      return;
    entry.acceptMacCheckedAt = now;
    this.verifiedHello(id).then(
      (raw) => {
        const hello = helloSchema.safeParse(raw);
        // A whole hello of this id, for the peer still held (a move carries `acceptMacCheckedAt` over;
        // a peer removed and added again since starts afresh).
        const cur = this.peers.get(id);
        if (!hello.success || hello.data.id !== id || cur?.acceptMacCheckedAt !== now) return;
        cur.acceptMac = hello.data.channelAcceptMac === true;
      },
      () => {}, // unreachable or garbled: the MAC stays required; asked again after the wait
    );
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
   */
  async hello(id: string): Promise<unknown> {
    const body = await this.exchange(id, "GET", HELLO_PATH, undefined, {});
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
  async verifiedHello(id: string): Promise<unknown> {
    const peer = this.get(id);
    const challenge = randomBytes(16).toString("hex");
    const path = HELLO_PATH;
    try {
      const headers = this.opts.auth.sign({
        method: "GET",
        path,
        body: undefined,
        to: id,
        headers: { [HEADER_CHALLENGE]: challenge },
      });
      const res = await this.poolOf(peer).request({
        method: "GET",
        path,
        signal: AbortSignal.timeout(this.t.messageTotalMs),
        headers,
      });
      const bytes = await readBoundedBytes(res.body, 64 * 1024);
      const text = bytes.toString("utf8");
      checkAnswer(`peer ${id}`, this.opts.auth, headers, res, bytes, `${path}: ${text}`, 200);
      const proof = res.headers[HEADER_PROOF];
      const check = this.opts.auth.checkHelloProof;
      if (check && !check(id, challenge, text, typeof proof === "string" ? proof : undefined))
        throw new TransportError("protocol", `peer ${id}: hello without a valid proof of its id (proof)`);
      try {
        return JSON.parse(text);
      } catch {
        throw new TransportError("protocol", `peer ${id}: hello is not JSON`);
      }
    } catch (err) {
      throw classify(err);
    }
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
   * answer (validate it with `checkPeerHello`).
   */
  /** `seen`, if given, gets what the URL's host resolved to and which address answered (probe-addresses.ts). */
  async probeHello(
    url: string,
    seen?: ProbeAddresses,
  ): Promise<{ hello: unknown; certId: string | undefined }> {
    const base = this.opts.auth.connectOptions(undefined);
    let certId: string | undefined;
    const check = base?.checkServerIdentity as
      | ((host: string, cert: PeerCertificate) => Error | undefined)
      | undefined;
    const connect =
      base && check
        ? {
            ...base,
            checkServerIdentity: (host: string, cert: PeerCertificate) => {
              const err = check(host, cert);
              if (err === undefined) certId = peerIdFromCert(cert);
              return err;
            },
          }
        : base;
    const origin = new URL(url);
    const client = new Client(origin.origin, {
      connectTimeout: this.t.connectMs,
      headersTimeout: this.t.messageTotalMs,
      bodyTimeout: this.t.messageTotalMs,
      pipelining: 0,
      ...(seen
        ? { connect: recordingConnector(origin.hostname, connect, this.t.connectMs, seen) }
        : connect
          ? { connect }
          : {}),
    });
    const path = HELLO_PATH;
    try {
      // Whoever answers there: the id is what this asks.
      const headers = this.opts.auth.sign({ method: "GET", path, body: undefined, to: ANY_DESTINATION });
      const res = await client.request({
        method: "GET",
        path,
        signal: AbortSignal.timeout(this.t.messageTotalMs),
        headers,
      });
      const bytes = await readBoundedBytes(res.body, 64 * 1024);
      const text = bytes.toString("utf8");
      checkAnswer(url, this.opts.auth, headers, res, bytes, `${path}: ${text}`, 200);
      try {
        return { hello: JSON.parse(text), certId };
      } catch {
        throw new TransportError("protocol", `${url}: hello is not JSON`);
      }
    } catch (err) {
      throw classify(err);
    } finally {
      void client.destroy().catch(() => {});
    }
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
    const body = Buffer.from(JSON.stringify(forwardToWire(msg, withText)));
    const path = FORWARD_PATH;
    const t = forwardTimeouts(this.t, msg.deadlineMs);
    // One controller and one timer, cleared when the answer is in: unlike AbortSignal.timeout's, no
    // timer outlives its request.
    const ac = new AbortController();
    const timer = setTimeout(
      () => ac.abort(new DOMException(`forward to ${id} took over ${t.forwardTotalMs} ms`, "TimeoutError")),
      t.forwardTotalMs,
    );
    timer.unref?.();
    try {
      const headers = this.opts.auth.sign({
        method: "POST",
        path,
        body,
        to: peer.id,
        headers: { "content-type": "application/json" },
      });
      const opener = this.opts.auth.responseOpener(headers);
      const res = await this.poolOf(peer).request({
        method: "POST",
        path,
        body,
        signal: ac.signal,
        headersTimeout: t.firstByteMs,
        bodyTimeout: t.gapMs,
        headers,
      });
      if (res.statusCode !== 200) {
        const bytes = await readBoundedBytes(res.body, 4096);
        // A refusal is the peer's only if it is sealed as its answer to this request.
        const authentic = !opener || opener.head(res.statusCode, res.headers, bytes);
        throw new TransportError(
          "http",
          `peer ${id} refused forward: ${res.statusCode} ${bytes.toString("utf8")}${authentic ? "" : UNAUTHENTICATED}`,
          res.statusCode,
          !authentic,
        );
      }
      // The head (the ack and its epoch) first; each record's tag as it is read.
      if (opener && !opener.head(res.statusCode, res.headers)) {
        // Not this request's answer: nothing more of this connection is read.
        res.body.on("error", () => {}).destroy();
        throw new TransportError(
          "protocol",
          `peer ${id}: forward answer fails its response MAC`,
          undefined,
          true,
        );
      }
      onAck?.(parseEpoch(res.headers));
      return await readForwardStream(id, res.body, onChunk, opener);
    } catch (err) {
      throw classify(err);
    } finally {
      clearTimeout(timer);
    }
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

/**
 * An answer taken whole must be the serving node's to this request (shared-secret mode): a wrong,
 * missing or moved response MAC makes it garbage, as a malformed answer is. A node older than
 * protocol 3 sends none, so the message says so (its hello cannot be trusted to say its version).
 */
function checkAnswer(
  who: string,
  auth: PeerAuth,
  /** The headers our request was sent with (its response MAC is bound to them). */
  sent: Readonly<Record<string, string>>,
  res: { statusCode: number; headers: Readonly<Record<string, string | string[] | undefined>> },
  body: Uint8Array,
  /** What a refusal is said to (`PATH: body`), for its message. */
  what: string,
  /** The one status that answers (a hello's 200); otherwise any below 300 does. */
  wantStatus?: number,
): void {
  const opener = auth.responseOpener(sent);
  const authentic = !opener || opener.head(res.statusCode, res.headers, body);
  // A refusal is an HTTP error either way; unsealed, it is no verdict of the peer's.
  if (wantStatus === undefined ? res.statusCode >= 300 : res.statusCode !== wantStatus) {
    // Only where requests carry a timestamp: shared-secret mode. Said before the body, which a
    // shown error is cut within (seed-states.ts).
    const skew = auth.clock ? clockSkewOf(res.statusCode, res.headers, body, auth.clock()) : undefined;
    const clock =
      skew === undefined ? "" : ` (clock skew: this node's clock is ${describeSkew(skew)} the peer's)`;
    throw new TransportError(
      "http",
      `${who} answered ${res.statusCode}${clock} to ${what}${authentic ? "" : UNAUTHENTICATED}`,
      res.statusCode,
      !authentic,
      skew,
    );
  }
  if (authentic) return;
  const why =
    res.headers[HEADER_RESPONSE_MAC] === undefined
      ? "carries no response MAC (a peer older than protocol 3, or altered on the path)"
      : "fails its response MAC";
  throw new TransportError("protocol", `${who}: answer ${why}`, undefined, true);
}

/** Said of a refusal that carried no valid response MAC. */
const UNAUTHENTICATED = " (not authenticated: no valid response MAC)";
