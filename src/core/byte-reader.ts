/**
 * A cursor over bytes a peer sent, for the core's message decoders (SWIM, Scuttlebutt): every read is
 * bounds-checked and every failure is thrown as the caller's own error type, so each codec keeps only
 * its format and its limits.
 */
import { MAX_VARINT_BYTES } from "./varint.js";

export class ByteReader {
  pos = 0;

  constructor(
    private readonly bytes: Uint8Array,
    private readonly fail: (why: string) => Error,
  ) {}

  byte(): number {
    if (this.pos >= this.bytes.length) throw this.fail("truncated");
    return this.bytes[this.pos++] as number;
  }

  /** An unsigned LEB128 varint of at most MAX_VARINT_BYTES bytes. */
  varint(): number {
    let v = 0;
    let mul = 1;
    for (let i = 0; i < MAX_VARINT_BYTES; i++) {
      const b = this.byte();
      v += (b & 0x7f) * mul;
      if (b < 0x80) return v;
      mul *= 128;
    }
    throw this.fail("varint too long");
  }

  /** The next `n` bytes (a view, not a copy); `why` when fewer remain. */
  take(n: number, why: string): Uint8Array {
    if (this.pos + n > this.bytes.length) throw this.fail(why);
    const out = this.bytes.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }

  /** The message must end exactly here. */
  end(): void {
    if (this.pos !== this.bytes.length) throw this.fail("trailing bytes");
  }
}
