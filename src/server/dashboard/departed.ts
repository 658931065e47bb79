/**
 * The dashboard's lines for the trust this node keeps of peers out of the membership (`/cluster`'s
 * `departedTrust`): what each comes back with, so a returning staller is seen to start demoted; and the
 * alert for a peer not live, which tells a goodbye from a death. Text only, no DOM, so it is
 * unit-tested in Node; app.ts puts each part in its own element as text.
 */
import { fmtSec } from "./refused.js";

/** What the page shows of one departed peer's kept record. */
export interface DepartedLine {
  id: string;
  /** Its breaker: closed, open, half-open or quarantined. */
  state: string;
  /** "score 0.42 · 3 failures (2 late) · opened 1× · gone 12 s · epoch 17": why it comes back so. */
  detail: string;
}

/** Records listed by name; the rest are counted ("and N more"). */
export const MAX_DEPARTED_SHOWN = 5;

const num = (x: unknown): number => (typeof x === "number" && Number.isFinite(x) ? x : 0);

/** The first `max` kept records as lines (the last gone first, as `/cluster` lists them), and how many more. */
export function departedLines(
  departed: unknown,
  max = MAX_DEPARTED_SHOWN,
): { lines: DepartedLine[]; more: number } {
  const d = (typeof departed === "object" && departed !== null ? departed : {}) as {
    total?: unknown;
    peers?: unknown;
  };
  // Entries that are not objects are skipped: odd JSON must not stop the page's update.
  const all = (Array.isArray(d.peers) ? (d.peers as unknown[]) : []).filter(
    (p): p is Record<string, unknown> => typeof p === "object" && p !== null,
  );
  const lines = all.slice(0, Math.max(0, max)).map((p) => {
    const t = (typeof p.trust === "object" && p.trust !== null ? p.trust : {}) as Record<string, unknown>;
    const epoch = typeof p.epoch === "number" ? ` · epoch ${p.epoch}` : "";
    // Of its failures, those for slowness (an older node says none).
    const late = num(t.late) > 0 ? ` (${num(t.late)} late)` : "";
    return {
      id: String(p.id),
      state: String(t.state ?? "unknown"),
      detail:
        `score ${num(t.score).toFixed(2)} · ${num(t.failures)} failures${late}` +
        ` · opened ${num(t.opened)}×` +
        ` · gone ${fmtSec(num(p.goneForMs))}${epoch}`,
    };
  });
  return { lines, more: Math.max(all.length, num(d.total)) - lines.length };
}

/** A peer not live as `/cluster` shows it (`gone`: why a former member went, gossip "scuttlebutt"). */
export interface NotLivePeer {
  id: string;
  liveness: string;
  estimateAgeMs?: number | null;
  goneForMs?: number;
  gone?: "left" | "dead";
}

/** The alert's text for a peer not live: a goodbye (a planned stop) reads apart from a death. */
export function peerAlertText(p: NotLivePeer): string {
  const heard =
    p.goneForMs != null
      ? `no longer a member for ${fmtSec(p.goneForMs)}, its estimate dropped`
      : p.estimateAgeMs == null
        ? "never heard from"
        : `last heard ${fmtSec(p.estimateAgeMs)} ago`;
  const down =
    p.gone === "left"
      ? "said goodbye: a planned stop"
      : p.gone === "dead"
        ? "declared dead"
        : "said goodbye, or silent too long";
  const what =
    p.liveness === "down"
      ? `is down (${down}): not routed to`
      : p.liveness === "suspected"
        ? "cannot be reached (suspected): not routed to"
        : "has not been heard from yet";
  return `Peer ${p.id} ${what}; ${heard}.`;
}
