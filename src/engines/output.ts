/**
 * Streams generated text while honouring stop strings: text that could still turn out to be the
 * start of a stop string is held back, and a detected stop cuts the output exactly before it.
 * Shared by engines that generate locally.
 */
export class StopAwareOutput {
  private emitted = 0;
  private text = "";
  private readonly holdBack: number;
  stopped = false;

  constructor(
    private readonly stops: string[],
    private readonly onChunk?: (text: string) => void,
  ) {
    this.holdBack = Math.max(0, ...stops.map((s) => s.length - 1));
  }

  /** Takes the full decoded text so far; returns true once a stop string appeared. */
  update(fullText: string): boolean {
    if (this.stopped) return true;
    // An incomplete UTF-8 sequence decodes to U+FFFD; wait for the rest before emitting it.
    const stable = fullText.endsWith("\uFFFD") ? fullText.replace(/\uFFFD+$/, "") : fullText;
    let cut = -1;
    for (const s of this.stops) {
      if (s.length === 0) continue;
      const i = stable.indexOf(s);
      if (i >= 0 && (cut < 0 || i < cut)) cut = i;
    }
    if (cut >= 0) {
      this.text = stable.slice(0, cut);
      this.stopped = true;
      this.flush(this.text.length);
      return true;
    }
    this.text = stable;
    this.flush(Math.max(this.emitted, stable.length - this.holdBack));
    return false;
  }

  /** Ends generation (length/EOS): everything held back is emitted. Returns the final text. */
  finish(fullText?: string): string {
    if (!this.stopped && fullText !== undefined) this.text = fullText;
    this.flush(this.text.length);
    return this.text;
  }

  private flush(upTo: number): void {
    if (upTo > this.emitted) {
      this.onChunk?.(this.text.slice(this.emitted, upTo));
      this.emitted = upTo;
    }
  }
}
