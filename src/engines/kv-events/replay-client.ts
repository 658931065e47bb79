/**
 * The publisher's replay endpoint (ROUTER) from our side: one request at a time asks for every
 * buffered batch from a sequence number, and its replies are read within a time and a count bound.
 * What the batches mean is the subscriber's.
 */
import { Dealer } from "zeromq";
import { decodeSequence, END_OF_REPLAY, encodeSequence } from "./sequence-frame.js";

export interface ReplayClientOptions {
  endpoint: string;
  /** The whole replay's bound, from the request to its end marker. */
  timeoutMs: number;
  maxBatches: number;
  maxMessageSize: number;
}

/**
 * "done": the end marker came (every batch before it was handed on); "enough": the reader said it
 * needs no more, so the rest of the reply was left unread.
 */
export type ReplayRead = { kind: "done" } | { kind: "enough" } | { kind: "failed"; why: string };

const EMPTY = new Uint8Array(0);

export class ReplayClient {
  private dealer: Dealer | undefined;
  /** The rest of a reply read only in part, being read to its end marker so the socket can be reused. */
  private draining: Promise<void> | undefined;

  /** `closed`: the subscriber closed; a replay under way then ends, failed. */
  constructor(
    private readonly opts: ReplayClientOptions,
    private readonly closed: () => boolean,
  ) {}

  /**
   * Asks for every buffered batch from `from` and hands each to `onBatch`, in the order they come,
   * until the end marker or until `onBatch` returns true (it has what it needs).
   */
  async request(
    from: number,
    onBatch: (seq: number, payload: Buffer) => boolean | undefined,
  ): Promise<ReplayRead> {
    const deadline = Date.now() + this.opts.timeoutMs;
    // The last reply's rest is waited for within this replay's bound, at most half of it (the live
    // batches wait behind): one still unread by then (an engine gone mid-reply) drops its socket.
    if (this.draining && !(await this.drained(this.opts.timeoutMs / 2))) this.close();
    this.draining = undefined;
    // Closed meanwhile: a new socket's send to a gone engine would hold the close for its whole bound.
    if (this.closed()) return this.failed("closed");
    const dealer = this.socket();
    dealer.sendTimeout = Math.max(1, deadline - Date.now());
    try {
      await dealer.send([EMPTY, encodeSequence(from)]);
    } catch (e) {
      return this.failed(`the replay endpoint is unreachable (${(e as Error).message})`);
    }
    for (let n = 0; ; n++) {
      if (n > this.opts.maxBatches) return this.failed("the replay sent more batches than allowed");
      const left = deadline - Date.now();
      if (left <= 0 || this.closed()) return this.failed("the replay timed out");
      dealer.receiveTimeout = left;
      let frames: Buffer[];
      try {
        frames = await dealer.receive();
      } catch (e) {
        return this.failed(this.closed() ? "closed" : `the replay timed out (${(e as Error).message})`);
      }
      if (frames.length !== 3 || frames[0]!.byteLength !== 0)
        return this.failed(`a replay reply of ${frames.length} frames`);
      let seq: number;
      try {
        seq = decodeSequence(frames[1]!, true);
      } catch (e) {
        return this.failed(`a bad replay sequence number: ${(e as Error).message}`);
      }
      if (seq === END_OF_REPLAY) return { kind: "done" };
      if (onBatch(seq, frames[2]!)) {
        // The rest of this reply is still coming: read it away, meanwhile, before the next request.
        this.draining = this.drain(dealer);
        return { kind: "enough" };
      }
    }
  }

  /**
   * Reads the rest of a reply up to its end marker (the publisher answers one request at a time, in
   * order), within the replay bound. One that does not end in time, or ends oddly, closes the socket.
   */
  private async drain(dealer: Dealer): Promise<void> {
    const deadline = Date.now() + this.opts.timeoutMs;
    try {
      for (let n = 0; n <= this.opts.maxBatches; n++) {
        const left = deadline - Date.now();
        if (left <= 0 || this.closed()) break;
        dealer.receiveTimeout = left;
        const frames = await dealer.receive();
        if (frames.length === 3 && decodeSequence(frames[1]!, true) === END_OF_REPLAY) return;
      }
    } catch {
      // Timed out, closed, or a bad frame: the socket is not reused either way.
    }
    if (this.dealer === dealer) this.close();
  }

  /** Whether the rest being read ended (read to its end marker, or its socket dropped) within `ms`. */
  private async drained(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    try {
      return await Promise.race([this.draining!.then(() => true), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Drops the socket; the next request makes a new one. */
  close(): void {
    this.dealer?.close();
    this.dealer = undefined;
    this.draining = undefined;
  }

  private failed(why: string): ReplayRead {
    // Replies to this request may still come: a new socket never mixes them into the next replay.
    this.close();
    return { kind: "failed", why };
  }

  private socket(): Dealer {
    if (!this.dealer) {
      this.dealer = new Dealer({
        linger: 0,
        // Queue a request only on a live connection, so an absent publisher fails the send fast.
        immediate: true,
        sendTimeout: this.opts.timeoutMs,
        maxMessageSize: this.opts.maxMessageSize,
      });
      this.dealer.connect(this.opts.endpoint);
    }
    return this.dealer;
  }
}
