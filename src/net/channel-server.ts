/**
 * The peer side of the forward channel: a WebSocket (RFC 6455, via `ws`) upgraded from GET
 * /peer/channel on the peer port. The upgrade request passes the same authentication as any peer
 * request (the TLS certificate, or the HMAC signature and replay window) and the same membership
 * check, or is refused before it becomes a channel; then forwards arrive as frames and their answers
 * leave as frames on the one connection. Why not a request per forward: on this hardware a peer
 * hop over HTTP costs several times a frame round trip (BENCHMARKS.md, "Router overhead").
 */
import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import { type WebSocket, WebSocketServer } from "ws";
import { answerRecord } from "./answer-wire.js";
import type { FrameMac } from "./auth/channel-mac.js";
import { FRAME_TAG_BYTES, HEADER_CHANNEL_MAC } from "./auth/channel-mac.js";
import { HEADER_NONCE } from "./auth/hmac.js";
import { rawJsonResponse } from "./connection-limit.js";
import { decodeForwardFrame } from "./forward-frame.js";
import type { PeerServerHandlers } from "./peer-handlers.js";
import { replyStream } from "./reply-stream.js";
import { type AcceptAnswer, admitPeer, type PeerAuth } from "./transport-auth.js";
import { CHANNEL_PATH, type ForwardMsg, type ReplyMsg } from "./transport-wire.js";
import { MAX_RECORDS_PER_FRAME } from "./wire-schemas.js";

/** One channel frame's payload: the records one event-loop turn produced, as a JSON array. */
export function encodeRecords(records: object[]): Buffer {
  return Buffer.from(JSON.stringify(records));
}

/** Channels one peer may hold open at once. */
export const MAX_CHANNELS_PER_PEER = 4;

export interface ChannelServerOptions {
  auth: PeerAuth;
  handlers: Pick<PeerServerHandlers, "isKnownPeer" | "onForward" | "onMessage" | "onAuthRejected">;
  maxForwardBytes: number;
  delay?: (() => Promise<void>) | undefined;
  logger?: { warn(obj: object, msg: string): void } | undefined;
  /** The upgrade's connection carries a member's channel (called before it becomes one). */
  onMember?: ((socket: import("node:net").Socket) => void) | undefined;
}

export interface ForwardChannelServer {
  /** Closes every channel (code 1001): their open streams are cut off, which origins treat as errors. */
  close(): void;
}

/**
 * Ends an upgrade that will not become a channel with a plain HTTP answer, like any refused request
 * (bodiless to a HEAD, which HTTP forbids a body).
 */
function refuse(
  req: IncomingMessage,
  socket: Duplex,
  status: number,
  error: string,
  headers: Record<string, string> = {},
): void {
  socket.end(rawJsonResponse(status, { error }, headers, req.method === "HEAD"));
}

/** What a 101 answer's lines (`Name: value` after the status line) settle about the channel. */
function acceptAnswer(lines: readonly string[]): AcceptAnswer {
  const field = (name: string) => {
    const prefix = `${name.toLowerCase()}:`;
    const line = lines.find((l) => l.toLowerCase().startsWith(prefix));
    return line === undefined ? "" : line.slice(prefix.length).trim();
  };
  return {
    accept: field("Sec-WebSocket-Accept"),
    extensions: field("Sec-WebSocket-Extensions"),
    protocol: field("Sec-WebSocket-Protocol"),
  };
}

export function attachForwardChannel(server: Server, opts: ChannelServerOptions): ForwardChannelServer {
  const { auth, handlers } = opts;
  const wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    // A forward frame is the forward body plus the envelope (and a tag in shared-secret mode).
    maxPayload: opts.maxForwardBytes + FRAME_TAG_BYTES + 256,
  });

  /** Open channels per peer id. */
  const channelsOf = new Map<string, number>();
  /** The verified sender of each upgrade being answered: what its 101's tag is bound to. */
  const senders = new WeakMap<IncomingMessage, string>();
  // Shared-secret mode: the 101 answer vouches for itself (channel-mac.ts), so the client can tell it
  // from one made on the path before it runs the channel. `ws` hands over the answer's lines here.
  const seal = auth.sealChannelAccept?.bind(auth);
  if (seal)
    wss.on("headers", (lines: string[], req: IncomingMessage) => {
      const sender = senders.get(req);
      if (sender === undefined) return;
      const tag = seal(req.headers, sender, acceptAnswer(lines));
      if (tag !== undefined) lines.push(`${HEADER_CHANNEL_MAC}: ${tag}`);
    });
  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => {}); // a peer hanging up mid-handshake is not our error
    const path = req.url ?? "";
    const channel = path === CHANNEL_PATH;
    // Authenticated first, as every peer request: a stranger learns nothing, not even which paths
    // exist. Membership is asked only of a channel (an unknown path has nothing to grant).
    const r = admitPeer(
      auth,
      handlers,
      { method: req.method ?? "", path, headers: req.headers, body: undefined, socket: req.socket },
      channel,
    );
    if (!r.ok) {
      refuse(req, socket, r.status, r.error);
      return;
    }
    if (!channel) {
      refuse(req, socket, 404, "no such peer endpoint");
      return;
    }
    if (req.method !== "GET") {
      const error = `${req.method} is not allowed on ${path}; allowed: GET`;
      refuse(req, socket, 405, error, { Allow: "GET" });
      return;
    }
    // A peer needs one channel (two while a dead one is being replaced): more is a bug or abuse.
    const open = channelsOf.get(r.sender) ?? 0;
    if (open >= MAX_CHANNELS_PER_PEER) {
      const error = `peer '${r.sender}' already has ${open} forward channels open`;
      refuse(req, socket, 429, error, { "Retry-After": "1" });
      return;
    }
    opts.onMember?.(req.socket);
    channelsOf.set(r.sender, open + 1);
    socket.once("close", () => {
      const n = (channelsOf.get(r.sender) ?? 1) - 1;
      if (n > 0) channelsOf.set(r.sender, n);
      else channelsOf.delete(r.sender);
    });
    const nonce = req.headers[HEADER_NONCE];
    const mac = auth.channelMac(typeof nonce === "string" ? nonce : "", r.sender, "server");
    senders.set(req, r.sender);
    wss.handleUpgrade(req, socket, head, (ws) => serveChannel(ws, r.sender, mac));
  });

  function serveChannel(ws: WebSocket, peer: string, mac: FrameMac | undefined): void {
    ws.on("error", () => {}); // 'close' follows; open streams see `closed`
    // Records made in one event-loop turn leave together (see the wire format): one frame, one write.
    // A final record leaves at once with whatever waits before it: its stream is done, and this saves
    // the event-loop turn the deferred flush would cost.
    let outbox: object[] = [];
    let pending: NodeJS.Immediate | undefined;
    const flush = () => {
      if (pending) clearImmediate(pending);
      pending = undefined;
      const records = outbox;
      outbox = [];
      if (ws.readyState !== ws.OPEN) return;
      for (let i = 0; i < records.length; i += MAX_RECORDS_PER_FRAME) {
        const payload = encodeRecords(records.slice(i, i + MAX_RECORDS_PER_FRAME));
        ws.send(mac ? mac.seal(payload) : payload, { binary: true });
      }
    };
    const send = (record: object, last = false) => {
      outbox.push(record);
      if (last) flush();
      else pending ??= setImmediate(flush);
    };
    const gone = () => ws.readyState !== ws.OPEN;
    const drop = (code: number, why: string) => {
      opts.logger?.warn({ peer, why }, "forward channel closed: bad frame");
      ws.close(code, why);
    };
    /** Forwards handed to the node whose streams are open, by stream: what a later cancel names. */
    const handed = new Map<number, { reqId: string; attempt: number }>();
    /**
     * Forwards read this event-loop turn, handed to the node at its end, with whether a cancel came
     * behind them: a peer resumed after a freeze reads the forwards its origins gave up on together
     * with their cancels, and a forward the node got first would start at once on an idle engine.
     */
    let arrived: { k: number; msg: ForwardMsg; cancelled: boolean }[] = [];
    let handing: NodeJS.Immediate | undefined;
    const cancelOf = (m: { reqId: string; attempt: number }, final?: true) =>
      final
        ? ({ type: "cancel", reqId: m.reqId, attempt: m.attempt, final } as const)
        : ({ type: "cancel", reqId: m.reqId, attempt: m.attempt } as const);
    const handOver = () => {
      handing = undefined;
      const batch = arrived;
      arrived = [];
      for (const { k, msg, cancelled } of batch) {
        if (gone()) return;
        // The cancel first: the node then drops the forward on arrival and answers it as cancelled.
        if (cancelled) handlers.onMessage(peer, cancelOf(msg), 0);
        handed.set(k, { reqId: msg.reqId, attempt: msg.attempt });
        handlers.onForward(peer, msg, replyStream(opts.delay, carrier(k)));
      }
    };
    ws.on("message", (data: Buffer) => {
      const payload = mac ? mac.open(data) : data;
      if (!payload) return drop(1008, "bad frame tag");
      const frame = decodeForwardFrame(payload);
      if (!frame.ok) {
        if (frame.k === undefined) return drop(1008, frame.error);
        return send(answerRecord.rej(frame.k, frame.error), true);
      }
      if (frame.msg === undefined) {
        const waiting = arrived.find((f) => f.k === frame.k);
        if (waiting) waiting.cancelled = true;
        else {
          const forward = handed.get(frame.k);
          if (forward) handlers.onMessage(peer, cancelOf(forward, frame.final), payload.length);
        }
        return;
      }
      arrived.push({ k: frame.k, msg: frame.msg, cancelled: false });
      handing ??= setImmediate(handOver);
    });
    ws.on("close", () => {
      if (handing) clearImmediate(handing);
      arrived = [];
      handed.clear();
    });

    /**
     * Stream k's writer. Made apart from the message handler: closures made there would share its
     * context (the frame, its buffer and the decoded forward) and keep all of it alive as long as the
     * answer stream lives — long enough to be copied by a scavenge or two.
     */
    function carrier(k: number) {
      return {
        ack: (epoch?: number) => send(answerRecord.ack(k, epoch)),
        chunk: (text: string) => send(answerRecord.chunk(k, text)),
        final: (m: ReplyMsg) => {
          handed.delete(k);
          send(answerRecord.final(k, m), true);
        },
        gone,
      };
    }
  }

  return {
    close() {
      for (const ws of wss.clients) {
        ws.close(1001, "shutting down");
        // A peer that does not answer the closing handshake must not hold the server open.
        setTimeout(() => ws.terminate(), 1000).unref();
      }
      wss.close();
    },
  };
}
