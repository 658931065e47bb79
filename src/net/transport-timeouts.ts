/**
 * The peer client's timeouts (transport-client.ts), explicit on everything: undici's defaults are 300 s.
 */

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

export const DEFAULT_TIMEOUTS: TransportTimeouts = {
  connectMs: 2_000,
  firstByteMs: 60_000,
  gapMs: 30_000,
  forwardTotalMs: 300_000,
  messageTotalMs: 5_000,
};
