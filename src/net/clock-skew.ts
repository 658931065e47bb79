/**
 * A peer's 401 that says our signed timestamp fell outside its window (shared-secret mode, hmac.ts):
 * the cause is a clock, ours or the peer's, not a credential, and the operator's fix is the clock. The
 * skew is our clock minus the peer's, from the 401 body's `clockMs` (the clock the peer judged by, to
 * the ms; at least half the window, else the request itself came late) or, from a peer that sends
 * none, its HTTP `Date` header (whole seconds) when that differs by more than the window. The answer
 * is unauthenticated (a 401 cannot be sealed), so the estimate only names a cause for the operator
 * and picks a retry pace; it never admits or refuses anyone by itself.
 */
import { DEFAULT_WINDOW_MS } from "./auth/hmac.js";

/** Beyond this a peer's clock reading is nonsense (ten years), not a skew. */
const MAX_SKEW_MS = 10 * 365 * 86_400_000;

/**
 * Our clock minus the peer's, in ms, if the answer (`status`, its headers and body) is a refusal of
 * our timestamp; undefined otherwise. `nowMs`: our clock (the one we sign with) as the answer came.
 */
export function clockSkewOf(
  status: number,
  headers: Readonly<Record<string, string | string[] | undefined>>,
  body: Uint8Array,
  nowMs: number,
): number | undefined {
  if (status !== 401) return undefined;
  const said = bodyClock(body);
  if (said !== undefined) {
    // Clocks this close cannot alone put a timestamp past the window: the request itself arrived
    // late (a stall on the path), and its next try passes; no skew is named.
    const skew = nowMs - said;
    return Math.abs(skew) >= DEFAULT_WINDOW_MS / 2 ? bounded(skew) : undefined;
  }
  const date = headers.date;
  const at = typeof date === "string" ? Date.parse(date) : Number.NaN;
  if (!Number.isFinite(at)) return undefined;
  // Whole seconds: the skew is only taken when it is well past what rounding and the trip explain.
  const skew = nowMs - at;
  return Math.abs(skew) > DEFAULT_WINDOW_MS ? bounded(skew) : undefined;
}

/** "45 s behind" / "2 min ahead of": how our clock stands against the peer's ("… the peer's"). */
export function describeSkew(skewMs: number): string {
  const s = Math.round(Math.abs(skewMs) / 1000);
  const size = s < 120 ? `${s} s` : s < 7_200 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3_600)} h`;
  return `${size} ${skewMs < 0 ? "behind" : "ahead of"}`;
}

/**
 * What an operator reads of a clock-skew refusal by `who` ("peer", "seed", "member"): the skew, the
 * window it exceeds, and the fix.
 */
export function skewAdvice(skewMs: number, who: string): string {
  return (
    `this node's clock is ${describeSkew(skewMs)} the ${who}'s, beyond the ±${DEFAULT_WINDOW_MS / 1000} s ` +
    "a shared secret allows; fix the clock (NTP) on whichever is wrong"
  );
}

function bodyClock(body: Uint8Array): number | undefined {
  if (body.byteLength > 4_096) return undefined;
  try {
    const v = (JSON.parse(Buffer.from(body).toString("utf8")) as { clockMs?: unknown } | null)?.clockMs;
    return typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : undefined;
  } catch {
    return undefined;
  }
}

function bounded(skew: number): number | undefined {
  return Math.abs(skew) <= MAX_SKEW_MS ? Math.round(skew) : undefined;
}
