/**
 * Reading llama-server's `/slots` back after an aborted run, so the node's tree takes what the server
 * kept of the slot rather than the guess made at its launch. The server sees an abort only when it
 * next writes to the closed stream: at once while it decodes, but only after the prefill when the
 * abort came during one, and a long prompt's prefill takes seconds. So the reads go on, with
 * back-off, until the slots read idle or the engine's own bound on a silent server has passed since
 * the abort (a prefill the engine would wait on no longer); the aborted run's rejection waits for them
 * ABORT_READ_WAIT_MS at most, so the node's next job is not held up, and the cache's watchers hear of
 * a read that came later (the node's tree then takes it).
 */

/** The first pause between reads, doubling up to ABORT_READ_MAX_GAP_MS. */
export const ABORT_READ_GAP_MS = 10;
export const ABORT_READ_MAX_GAP_MS = 1_000;
/** The longest an aborted run's rejection waits for the read-back (the common case: decode). */
export const ABORT_READ_WAIT_MS = 300;

/** One read: the slots idle (the mirror has them), still busy at the server, or no read possible. */
export type ReadVerdict = "idle" | "busy" | "stop";

export class AbortReadBack {
  private running: Promise<void> | undefined;
  /** When the reads stop (the engine's bound after the latest abort). */
  private until = 0;
  /** Rejections waiting on the reads now: a read they do not take goes to the watchers. */
  private waiting = 0;
  private readonly watchers = new Set<() => void>();
  private closed = false;
  /** Reads made (for tests and status). */
  reads = 0;

  constructor(
    /** The engine's own bound on a silent server (HttpClient `silenceBoundMs`). */
    private readonly boundMs: number,
    private readonly read: () => Promise<ReadVerdict>,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * After an abort: resolves when the slots were read idle (or cannot be read), or after
   * ABORT_READ_WAIT_MS, whichever is first; the reads go on until `boundMs` after this abort.
   */
  async after(): Promise<void> {
    this.until = this.now() + this.boundMs;
    this.running ??= this.loop();
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((r) => {
      timer = setTimeout(r, ABORT_READ_WAIT_MS);
      timer.unref?.();
    });
    this.waiting++;
    try {
      await Promise.race([this.running, waited]);
    } finally {
      this.waiting--;
      clearTimeout(timer);
    }
  }

  /** Whether reads go on now (status and tests: a test waits for them to end, not a fixed time). */
  get active(): boolean {
    return this.running !== undefined;
  }

  /** `onChange` is called when a read no rejection waited for found the slots idle. */
  watch(onChange: () => void): () => void {
    this.watchers.add(onChange);
    return () => this.watchers.delete(onChange);
  }

  close(): void {
    this.closed = true;
  }

  private async loop(): Promise<void> {
    try {
      await this.reading(); // always awaits first, so `running` is set before this ends
    } finally {
      // Cleared as the loop ends, not a tick later: an abort in between would join a finished loop
      // and get no read of its own.
      this.running = undefined;
    }
  }

  private async reading(): Promise<void> {
    for (let gap = ABORT_READ_GAP_MS, first = true; !this.closed; first = false) {
      if (!first) {
        if (this.now() + gap > this.until) return;
        await new Promise((r) => setTimeout(r, gap).unref?.());
        gap = Math.min(2 * gap, ABORT_READ_MAX_GAP_MS);
        if (this.closed) return;
      }
      this.reads++;
      const verdict = await this.read();
      if (verdict === "busy") continue;
      if (verdict === "idle" && this.waiting === 0) for (const w of this.watchers) w();
      return;
    }
  }
}
