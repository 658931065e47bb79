/**
 * The forwards this node serves for peers whose answer streams are still open: where each one's
 * output goes, which stream acks it, and closing streams the node never answers (transport-rules.ts:
 * [Transport acks], [Answer on the stream], [Stream TTL]).
 */
import type { EngineRequest } from "../../core/engine.js";
import type { ForwardReplyStream } from "../../net/reply-stream.js";
import type { ForwardMsg, ReplyMsg } from "../../net/transport-wire.js";
import { retryableError } from "./transport-rules.js";

/** A forward we serve whose answer stream is still open. */
interface ServedForward {
  stream: ForwardReplyStream;
  /**
   * Streams of the same forward sent again while this one was open: an origin that re-sends an
   * unanswered forward (`forwardResends` > 0; the daemon's own nodes leave it at 0). The node acks on
   * the newest — a stream acks once — and its one answer finishes them all.
   */
  resent?: ForwardReplyStream[];
  /** The forwarded request object: the key of this forward's output sink. */
  request: EngineRequest;
  reqId: string;
  attempt: number;
  /** The peer that sent it, and when it arrived (ms): for the served-forward log line. */
  from: string;
  receivedAt: number;
  /** When a stream the node never answered is closed (see sweep). */
  expiresAt: number;
}

/** What the served-forward log line is told of a forward this node answered. */
export type AnsweredForward = Pick<ServedForward, "request" | "reqId" | "attempt" | "from" | "receivedAt">;

/** A forward's key here: its sender, request id and attempt. */
export function streamKey(peer: string, reqId: string, attempt: number): string {
  return `${peer}|${reqId}|${attempt}`;
}

export class ServedForwards {
  /** Open answer streams, by `${from}|${reqId}|${attempt}`. */
  private readonly open = new Map<string, ServedForward>();
  /**
   * Which stream each running forward's output goes to. Weak, so a corner case that never answers
   * leaks nothing; deleted as soon as the answer is given all the same, so the common case leaves no
   * ephemeron for the scavenger to trace (it kept each forward's graph alive a while longer).
   */
  private readonly byRequest = new WeakMap<EngineRequest, ForwardReplyStream>();
  private sweeper: NodeJS.Timeout | undefined;

  /**
   * @param ttlMs how long a stream the node never answers stays open
   * @param onAnswered told of each forward's one answer (the served-forward log line)
   */
  constructor(
    private readonly ttlMs: number,
    private readonly onAnswered?: (served: AnsweredForward, reply: ReplyMsg) => void,
  ) {}

  /** Streams open now. */
  get size(): number {
    return this.open.size;
  }

  /**
   * Forward `msg` from `from` arrived on `stream`. A copy of one whose stream is open joins it: the
   * node sees a duplicate and never runs it, so the first one's output and answer are the only ones
   * coming (replacing the first stream left it open for good). Returns the first copy's request when
   * `msg` joined it (undefined: `msg` is the first).
   */
  add(from: string, msg: ForwardMsg, stream: ForwardReplyStream, now: number): EngineRequest | undefined {
    const key = streamKey(from, msg.reqId, msg.attempt);
    const open = this.open.get(key);
    if (open) {
      if (open.resent) open.resent.push(stream);
      else open.resent = [stream];
      return open.request;
    }
    this.open.set(key, {
      stream,
      request: msg.request,
      reqId: msg.reqId,
      attempt: msg.attempt,
      from,
      receivedAt: now,
      expiresAt: now + this.ttlMs,
    });
    this.byRequest.set(msg.request, stream);
    return undefined;
  }

  /** Whether `from`'s forward `reqId` (this `attempt`) has an open answer stream here. */
  isOpen(from: string, reqId: string, attempt: number): boolean {
    return this.open.has(streamKey(from, reqId, attempt));
  }

  /** Whether `request` is a forward we serve (with its stream open). */
  serves(request: EngineRequest): boolean {
    return this.byRequest.has(request);
  }

  /** Output for `request` onto its forward's stream; false if `request` is not a forward we serve. */
  chunk(request: EngineRequest, text: string): boolean {
    const stream = this.byRequest.get(request);
    if (stream === undefined) return false;
    stream.chunk(text);
    return true;
  }

  /**
   * The node's `forward-ack` (in its `epoch`), on the forward's newest stream. Without an open stream
   * there is nobody to tell: the origin falls back after its ack timeout.
   */
  ack(from: string, reqId: string, attempt: number, epoch?: number): void {
    const served = this.open.get(streamKey(from, reqId, attempt));
    (served?.resent?.at(-1) ?? served?.stream)?.ack(epoch);
  }

  /** Ends the answer stream(s) of `reply`'s forward from `from`; false if none is open (any more). */
  answer(from: string, reply: ReplyMsg): boolean {
    return this.finish(streamKey(from, reply.reqId, reply.attempt), reply);
  }

  /**
   * The node may drop a forward without answering (e.g. a wedged engine); its origin gave up on it
   * after the forward timeout, so a stream still open past its TTL is closed here. One sweep for all
   * streams rather than a timer per forward: a timer per forward was allocated, and cleared, on every one.
   */
  sweep(now: number): void {
    for (const [key, served] of [...this.open]) {
      if (served.expiresAt <= now) this.finish(key, retryableError(served, "not answered"));
    }
  }

  /** Sweeps (`sweep`) every quarter of the TTL, within 20 ms – 5 s, until `finishAll`. */
  startSweeping(now: () => number): void {
    if (this.sweeper) return;
    this.sweeper = setInterval(() => this.sweep(now()), Math.min(5_000, Math.max(20, this.ttlMs / 4)));
    this.sweeper.unref?.();
  }

  /** Ends every open stream with a retryable `error` (shutdown), and the sweeping. */
  finishAll(error: string): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
    for (const [key, served] of [...this.open]) this.finish(key, retryableError(served, error));
  }

  private finish(key: string, reply: ReplyMsg): boolean {
    const served = this.open.get(key);
    if (!served) return false;
    this.open.delete(key);
    this.byRequest.delete(served.request);
    served.stream.finish(reply);
    if (served.resent) for (const s of served.resent) s.finish(reply);
    this.onAnswered?.(served, reply);
    return true;
  }
}
