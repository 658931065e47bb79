/**
 * `x-prefixmesh-deadline-ms`: how long the client will wait for its answer, in ms from when the
 * request arrives (relative: client and node clocks are not synced). Routing, admission and every
 * forward honour it (core/node/deadline.ts); past it the client gets 504.
 */
import { MAX_DEADLINE_MS } from "../../core/node/deadline.js";

export const DEADLINE_HEADER = "x-prefixmesh-deadline-ms";

/** The header's deadline (undefined when absent), or why it is malformed. */
export function parseDeadlineHeader(
  v: string | string[] | undefined,
): number | undefined | { error: string } {
  if (v === undefined) return undefined;
  const s = Array.isArray(v) ? (v.length === 1 ? v[0] : undefined) : v;
  if (s === undefined || !/^\d{1,7}$/.test(s.trim()))
    return { error: `${DEADLINE_HEADER} must be a whole number of ms in 1..${MAX_DEADLINE_MS}` };
  const ms = Number(s.trim());
  if (ms < 1 || ms > MAX_DEADLINE_MS)
    return { error: `${DEADLINE_HEADER} must be a whole number of ms in 1..${MAX_DEADLINE_MS}` };
  return ms;
}
