/**
 * One replay's batches as the subscriber reads them (subscriber.ts keeps the sequence rules and asks
 * for the replay): the check at its first batch that the publisher is the same, the batches its
 * buffer no longer holds, and what the replay came to.
 */
import type { ReplayRead } from "./replay-client.js";

export type ReplayOutcome =
  | { kind: "covered" }
  /** The buffer began after `next`: the batches between are lost (the sink was told, `lost`). */
  | { kind: "short" }
  /** `checked`: the publisher was told to be the same before the replay failed. */
  | { kind: "failed"; why: string; checked: boolean }
  | { kind: "restarted" };

/** The subscriber's side of a replay: its next expected number and what becomes of each batch. */
export interface ReplaySink {
  /** The next batch expected; undefined while none is (the replay's own start then). */
  next(): number | undefined;
  /** Applies a batch numbered `next` onward, in order. */
  apply(seq: number, payload: Uint8Array): void;
  /** The mirror forgets the blocks it holds, for `why`. */
  forget(why: string): void;
  /** Batches `first` to `after - 1` are lost: runs once, before batch `after` is applied. */
  lost(first: number, after: number): void;
}

export class ReplayReading {
  /** The number to ask the replay from: one batch early when the last batch applied can be compared. */
  readonly start: number;
  private readonly known: { seq: number; payload: Uint8Array } | undefined;
  private first = true;
  private other = false;
  private checked = false;
  /** Batches were lost between the last applied and the buffer's first (told to the sink once). */
  private short = false;

  /**
   * `until`: the number of a live batch already waiting (the one that showed the gap): the live
   * queue holds it and what follows, so the replay is read only until every batch before it is in.
   */
  constructor(
    private readonly from: number,
    lastApplied: { seq: number; payload: Uint8Array } | undefined,
    private readonly sink: ReplaySink,
    private readonly until?: number,
  ) {
    // The last batch applied, asked for again: the same publisher still buffers it unchanged.
    this.known = lastApplied?.seq === from - 1 ? lastApplied : undefined;
    this.start = this.known ? this.known.seq : from;
  }

  /** Each batch the replay brings, in order; true once the replay has brought every batch needed. */
  readonly batch = (seq: number, payload: Uint8Array): boolean => {
    this.take(seq, payload);
    return this.until !== undefined && (this.sink.next() ?? this.from) >= this.until;
  };

  private take(seq: number, payload: Uint8Array): void {
    if (this.other) return;
    const known = this.known;
    if (this.first && known) {
      this.first = false;
      if (seq === known.seq && !Buffer.from(payload).equals(Buffer.from(known.payload))) {
        this.other = true;
        return;
      }
      this.checked = seq === known.seq;
      // The batch to compare is gone though none after it is: a new publisher cannot be ruled out.
      if (seq === known.seq + 1)
        this.sink.forget(`batch ${known.seq} is no longer buffered: the publisher may have restarted`);
    }
    const next = this.sink.next() ?? this.from;
    if (seq < next) return;
    if (seq > next && !this.short) {
      this.short = true;
      this.sink.lost(next, seq);
    }
    this.sink.apply(seq, payload);
  }

  /**
   * What the replay came to: a new publisher is told apart at its first batch, and a failure after it
   * does not undo that.
   */
  outcome(read: ReplayRead): ReplayOutcome {
    if (this.other) return { kind: "restarted" };
    if (read.kind === "failed") return { ...read, checked: this.checked };
    return this.short ? { kind: "short" } : { kind: "covered" };
  }
}
