/**
 * The dashboard's lines for the candidate members this node refuses (`/cluster`'s `refused`): text
 * only, no DOM, so it is unit-tested in Node; app.ts puts each part in its own element as text. The
 * reason comes from a peer's hello: it is never parsed as markup, only split at its code.
 */

// A type only (erased): the browser loads just the files dashboard.ts serves, never core's.
import type { RefusedView } from "../../core/refusals.js";

/** What the page shows of one refused candidate. */
export interface RefusedLine {
  id: string;
  /** The reason's code (`wrong-cluster`), shown prominently; `refused` when the text names none. */
  code: string;
  /** The rest of the reason, in full. */
  message: string;
  /** "3 refusals in a row". */
  refusals: string;
  /** "re-check in 25 s", or "re-check due". */
  recheck: string;
}

/** Candidates listed by name; the rest are counted ("and N more") so a crowd cannot flood the page. */
export const MAX_REFUSED_SHOWN = 5;

const CODE = /^([a-z][a-z0-9-]{0,39}):\s*([\s\S]*)$/;

/** `code: message` → its parts; a text without a code is all message. */
export function splitReason(text: string): { code: string; message: string } {
  const m = CODE.exec(text);
  return m ? { code: m[1] as string, message: m[2] as string } : { code: "refused", message: text };
}

/** A duration for the page: one decimal under 10 s, whole seconds above (app.ts shares it). */
export const fmtSec = (ms: number) =>
  ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;

/** When the candidate is asked again. */
export function recheckText(ms: number): string {
  return Number.isFinite(ms) && ms > 0 ? `re-check in ${fmtSec(ms)}` : "re-check due";
}

/** The first `max` refused candidates as lines, and how many more there are. */
export function refusedLines(
  refused: readonly RefusedView[] | undefined,
  max = MAX_REFUSED_SHOWN,
): { lines: RefusedLine[]; more: number } {
  // Entries that are not objects are skipped: odd JSON must not stop the page's update.
  const all = (Array.isArray(refused) ? (refused as unknown[]) : []).filter(
    (r): r is RefusedView => typeof r === "object" && r !== null,
  );
  const lines = all.slice(0, Math.max(0, max)).map((r) => {
    const n = Number.isFinite(r.refusals) ? Math.max(0, Math.round(r.refusals)) : 0;
    return {
      id: String(r.id),
      ...splitReason(String(r.reason ?? "")),
      refusals: `${n} refusal${n === 1 ? "" : "s"} in a row`,
      recheck: recheckText(r.recheckInMs),
    };
  });
  return { lines, more: all.length - lines.length };
}
