/**
 * The origin side of the forward channel: one WebSocket per peer, opened on first use and reopened
 * after it closes, with every forward to that peer multiplexed on it as a numbered stream. Each
 * forward keeps the transport's explicit timeouts (first answer frame, gap between frames, whole
 * forward); a channel that closes with streams open fails each of them at once — a cut-off answer is
 * an error, never a short one.
 */

import type { IncomingMessage } from "node:http";
import { WebSocket } from "ws";
import { type FrameMac, HEADER_CHANNEL_MAC } from "./auth/channel-mac.js";
import { HEADER_NONCE } from "./auth/hmac.js";
import { encodeCancelFrame, encodeForwardFrame } from "./forward-frame.js";
import { forwardTimeouts } from "./forward-timeouts.js";
import type { PeerAuth } from "./transport-auth.js";
import { CHANNEL_ACCEPT_REFUSED, classify, TransportError } from "./transport-error.js";
import { CHANNEL_PATH, type ForwardMsg, type ReplyMsg } from "./transport-wire.js";
import { channelFrameSchema, type channelRecordSchema } from "./wire-schemas.js";

type ChannelRecord = import("zod").infer<typeof channelRecordSchema>;

export interface ChannelTimeouts {
  connectMs: number;
  firstByteMs: number;
  gapMs: number;
  forwardTotalMs: number;
}

/** One WebSocket and what belongs to it; a channel reopens as a new connection after one closes. */
interface Conn {
  ws: WebSocket;
  mac: FrameMac | undefined;
  /** Something arrived since the last ping. */
  alive: boolean;
  ping: NodeJS.Timeout | undefined;
}

interface OpenStream {
  /** The connection the forward was sent on: only its frames answer it, only its close fails it. */
  conn: Conn;
  /** The forward's attempt, `${reqId}|${attempt}`: what a cancel finds it by. */
  attempt: string;
  onChunk: (text: string) => void;
  onAck: ((epoch?: number) => void) | undefined;
  resolve: (m: ReplyMsg) => void;
  reject: (e: TransportError) => void;
  /** First-frame, then between-frames timer. */
  idle: NodeJS.Timeout;
  total: NodeJS.Timeout;
  /** Longest silence between frames once the first came (forward-timeouts.ts). */
  gapMs: number;
  /** A frame of this stream arrived (ack or chunk): the peer has it; the gap timer runs from now on. */
  answered: boolean;
}

/** Frames from a peer are bounded like a streamed forward answer's records. */
const MAX_FRAME_BYTES = 16 * 1024 * 1024;
/** A silent connection is probed this often; one unanswered probe closes it (the next forward reopens). */
const PING_MS = 15_000;

export class ForwardChannel {
  /** The open connection, if any (one closing meanwhile still answers its own streams). */
  private conn: Conn | undefined;
  private opening: Promise<Conn> | undefined;
  /**
   * Forwards waiting for a connection: `opening` clears (and the connection may be released) before
   * such a forward resumes and puts its stream on it.
   */
  private starting = 0;
  private readonly streams = new Map<number, OpenStream>();
  private nextK = 0;
  private closed = false;

  constructor(
    private readonly peerId: string,
    /** The peer's base URL (http: or https:). */
    private readonly url: string,
    private readonly auth: PeerAuth,
    private readonly t: ChannelTimeouts,
    /**
     * Shared-secret mode: whether the peer's 101 answer must carry its channel MAC. False only for a
     * peer whose checked hello did not say it seals it (a build before the MAC) and which has sent no
     * valid one since: its 101 is taken as before, unproven (its frames still are MAC'd, so a forged
     * 101 can only make the channel fail).
     */
    private readonly acceptMacRequired: () => boolean = () => true,
    /** A 101 without the MAC was refused while it was required (the peer's hello may be out of date). */
    private readonly acceptMacMissing: () => void = () => {},
    /**
     * A 101 carried the peer's valid MAC: it seals its 101s now (an older build upgraded), so the MAC
     * is required again at once, and a path stripping it from a later 101 is refused.
     */
    private readonly acceptMacSeen: () => void = () => {},
  ) {}

  /**
   * Sends one forward and streams its answer; rejects with TransportError on any failure. `onAck`
   * once the peer has accepted the forward: its ack record (with the epoch it says), or the first chunk.
   */
  async forward(
    msg: ForwardMsg,
    onChunk: (text: string) => void,
    onAck?: (epoch?: number) => void,
    withPrompt = true,
  ): Promise<ReplyMsg> {
    let conn = this.conn?.ws.readyState === WebSocket.OPEN ? this.conn : undefined;
    if (!conn) {
      this.starting++;
      try {
        conn = await this.open();
      } finally {
        this.starting--; // the stream is registered below, in this same turn
      }
    }
    const k = this.nextK++;
    const payload = encodeForwardFrame(k, msg, withPrompt);
    const t = forwardTimeouts(this.t, msg.deadlineMs);
    return new Promise<ReplyMsg>((resolve, reject) => {
      const fail = (e: TransportError) => this.end(k)?.reject(e);
      const s: OpenStream = {
        conn,
        attempt: attemptKey(msg.reqId, msg.attempt),
        onChunk,
        onAck,
        resolve,
        reject,
        idle: setTimeout(
          () => fail(new TransportError("timeout", `peer ${this.peerId}: no answer in ${t.firstByteMs} ms`)),
          t.firstByteMs,
        ),
        total: setTimeout(
          () =>
            fail(new TransportError("timeout", `forward to ${this.peerId} took over ${t.forwardTotalMs} ms`)),
          t.forwardTotalMs,
        ),
        gapMs: t.gapMs,
        answered: false,
      };
      s.idle.unref();
      s.total.unref();
      this.streams.set(k, s);
      conn.ws.send(conn.mac ? conn.mac.seal(payload) : payload, { binary: true });
    });
  }

  /**
   * Cancels the open forward of `reqId`'s `attempt` on the connection it went on, behind it: a peer
   * that reads both at once (e.g. resumed after a freeze) drops the forward before it runs. The
   * stream stays open for the peer's answer (its refusal, or a result the origin drops as late).
   * False when no such forward is open here (the cancel then goes on its own request).
   */
  cancel(reqId: string, attempt: number, final = false): boolean {
    const key = attemptKey(reqId, attempt);
    for (const [k, s] of this.streams) {
      if (s.attempt !== key) continue;
      if (s.conn.ws.readyState !== WebSocket.OPEN) return false;
      const payload = encodeCancelFrame(k, final);
      s.conn.ws.send(s.conn.mac ? s.conn.mac.seal(payload) : payload, { binary: true });
      return true;
    }
    return false;
  }

  /**
   * Closes the connection if no forward is open on it (the channel reopens on its next forward): the
   * peer is no longer among those we keep connected (connected-peers.ts). False while one is open
   * or about to be (waiting for the connection).
   */
  release(): boolean {
    // `starting` covers a connection being opened: only a forward opens one.
    if (this.streams.size > 0 || this.starting > 0) return false;
    const conn = this.conn;
    this.conn = undefined;
    conn?.ws.close(1000, "idle");
    return true;
  }

  /** Closes the channel; open streams fail as cut off. */
  close(): void {
    this.closed = true;
    const conns = new Set([...this.streams.values()].map((s) => s.conn));
    if (this.conn) conns.add(this.conn);
    for (const c of conns) c.ws.terminate(); // each one's 'close' fails its streams
    this.failAll(new TransportError("cut-off", `channel to ${this.peerId} closed`));
  }

  /** Removes stream k and clears its timers; undefined if it had already ended. */
  private end(k: number): OpenStream | undefined {
    const s = this.streams.get(k);
    if (!s) return undefined;
    this.streams.delete(k);
    clearTimeout(s.idle);
    clearTimeout(s.total);
    return s;
  }

  /** Fails the open streams (of one connection, or all). */
  private failAll(e: TransportError, conn?: Conn): void {
    for (const [k, s] of [...this.streams]) if (!conn || s.conn === conn) this.end(k)?.reject(e);
  }

  private open(): Promise<Conn> {
    if (this.closed)
      return Promise.reject(new TransportError("connection", `channel to ${this.peerId} closed`));
    this.opening ??= this.connect().finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  private connect(): Promise<Conn> {
    const headers = this.auth.sign({ method: "GET", path: CHANNEL_PATH, body: undefined, to: this.peerId });
    const nonce = (headers as Record<string, string>)[HEADER_NONCE] ?? "";
    const base = new URL(this.url);
    const wsUrl = `${base.protocol === "https:" ? "wss:" : "ws:"}//${base.host}${CHANNEL_PATH}`;
    const ws = new WebSocket(wsUrl, {
      headers,
      perMessageDeflate: false,
      // RFC 6455 masks client frames so browsers cannot poison proxy caches (§10.3); between two
      // authenticated peers there is no such party, and an all-zero mask lets `ws` skip the per-byte
      // XOR (and a random draw per frame) on both ends.
      generateMask: (mask: Buffer) => void mask.fill(0),
      handshakeTimeout: this.t.connectMs,
      maxPayload: MAX_FRAME_BYTES,
      ...(this.auth.connectOptions(this.peerId) ?? {}),
    });
    const conn: Conn = {
      ws,
      mac: this.auth.channelMac(nonce, this.peerId, "client"),
      alive: true,
      ping: undefined,
    };
    return new Promise<Conn>((resolve, reject) => {
      let settled = false;
      ws.once("unexpected-response", (_req, res) => {
        settled = true;
        const status = res.statusCode ?? 0;
        res.resume();
        ws.terminate();
        reject(
          new TransportError("http", `peer ${this.peerId} refused the forward channel: ${status}`, status),
        );
      });
      // Before `ws` takes the socket as a channel: a 101 that is not the peer's is refused here.
      ws.once("upgrade", (res) => {
        const why = this.acceptRefusal(headers as Record<string, string>, res);
        if (why === undefined) return;
        settled = true;
        ws.terminate(); // still connecting: `ws` aborts the handshake, and 'open' never comes
        reject(
          new TransportError(
            "protocol",
            `peer ${this.peerId}: forward channel refused: ${why}`,
            undefined,
            true,
            undefined,
            CHANNEL_ACCEPT_REFUSED,
          ),
        );
      });
      ws.once("open", () => {
        settled = true;
        if (this.closed) {
          ws.terminate();
          reject(new TransportError("connection", `channel to ${this.peerId} closed`));
          return;
        }
        this.conn = conn;
        this.watch(conn);
        resolve(conn);
      });
      ws.on("error", (err) => {
        if (settled) return; // after open, 'close' follows and fails the open streams
        settled = true;
        reject(classify(err));
      });
      ws.on("close", (code, reason) => {
        if (conn.ping) clearInterval(conn.ping);
        if (this.conn === conn) this.conn = undefined;
        // 1006: the connection died (reset, peer gone); otherwise the peer closed it on purpose.
        const kind = code === 1006 ? "connection" : "cut-off";
        const why = `channel to ${this.peerId} closed (${code} ${reason.toString()})`;
        this.failAll(new TransportError(kind, why), conn);
      });
    });
  }

  /** Why the 101 answer `res` is not the peer's answer to the upgrade sent with `sent`, if it is not. */
  private acceptRefusal(sent: Readonly<Record<string, string>>, res: IncomingMessage): string | undefined {
    const check = this.auth.checkChannelAccept;
    if (!check) return undefined; // TLS proves who answered, or nothing can (insecure)
    const tag = res.headers[HEADER_CHANNEL_MAC];
    if (tag === undefined) {
      if (!this.acceptMacRequired()) return undefined;
      this.acceptMacMissing();
      return `its 101 answer carries no channel MAC (${HEADER_CHANNEL_MAC}): not the peer's answer, or a peer whose hello did not say it seals one`;
    }
    const header = (name: string) => {
      const v = res.headers[name];
      return typeof v === "string" ? v : "";
    };
    const answer = {
      accept: header("sec-websocket-accept"),
      extensions: header("sec-websocket-extensions"),
      protocol: header("sec-websocket-protocol"),
    };
    if (check.call(this.auth, sent, this.peerId, answer, tag)) {
      this.acceptMacSeen();
      return undefined;
    }
    return `its 101 answer fails its channel MAC (${HEADER_CHANNEL_MAC}): not ${this.peerId}'s answer to this upgrade`;
  }

  private watch(conn: Conn): void {
    const { ws } = conn;
    ws.on("message", (data: Buffer) => {
      conn.alive = true;
      const payload = conn.mac ? conn.mac.open(data) : data;
      if (!payload) return this.garbled(conn, "bad frame tag");
      let frame: ReturnType<typeof channelFrameSchema.safeParse>;
      try {
        frame = channelFrameSchema.safeParse(JSON.parse(payload.toString("utf8")));
      } catch {
        return this.garbled(conn, "frame is not JSON");
      }
      if (!frame.success) return this.garbled(conn, "invalid frame");
      for (const r of frame.data) this.deliver(conn, r);
    });
    ws.on("pong", () => {
      conn.alive = true;
    });
    conn.ping = setInterval(() => {
      if (!conn.alive) return ws.terminate();
      conn.alive = false;
      ws.ping();
    }, PING_MS);
    conn.ping.unref();
  }

  private deliver(conn: Conn, r: ChannelRecord): void {
    const s = this.streams.get(r.k);
    if (!s || s.conn !== conn) return; // an answer we gave up on (or not this connection's to give)
    if (r.t === "ack" || r.t === "chunk") {
      if (s.answered) s.idle.refresh();
      else {
        s.answered = true;
        clearTimeout(s.idle);
        s.idle = setTimeout(() => {
          if (this.end(r.k))
            s.reject(new TransportError("timeout", `peer ${this.peerId}: silent for ${s.gapMs} ms`));
        }, s.gapMs);
        s.idle.unref();
        s.onAck?.(r.t === "ack" ? r.e : undefined);
      }
      if (r.t === "chunk") s.onChunk(r.text);
      return;
    }
    this.end(r.k);
    if (r.t === "msg") s.resolve(r.msg);
    else s.reject(new TransportError("http", `peer ${this.peerId} refused forward: ${r.error}`, 400));
  }

  /** A peer sending frames we cannot read: fail its streams as a protocol error and start over. */
  private garbled(conn: Conn, why: string): void {
    this.failAll(new TransportError("protocol", `peer ${this.peerId}: ${why}`), conn);
    conn.ws.close(1002, why);
  }
}

function attemptKey(reqId: string, attempt: number): string {
  return `${reqId}|${attempt}`;
}
