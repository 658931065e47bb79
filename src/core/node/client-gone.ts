/**
 * Clients that hung up before their reply (the `client-gone` input). The origin settles such a
 * request without a reply and stops spending on it where it can: a forward pending at a peer is
 * sent that peer's `cancel` (it drops the job if still queued) and ends as neither a fallback nor a
 * failure of the peer (a final one: abort-runs.ts); a job waiting in our queue is taken out; a job
 * running on our engine is aborted when the engine can (abort-runs.ts), else left to finish,
 * unreplied. A late answer for it finds nothing pending and is dropped like any late answer.
 *
 * This file keeps the recently gone ids, so that a reply for one of them is caught as a bug: the
 * exactly-once rule says the request left the pending table, and nothing else may answer it.
 */
import { invariant } from "../invariant.js";
import type { Effect } from "./types.js";

/** Where a request was when its client hung up (what the origin did about it, above). */
export type GoneStage = "queued" | "forwarded" | "running";

/**
 * Gone ids remembered for the check: a late answer comes within a forward timeout or a run, long
 * before this many more clients hang up; past it, an id is forgotten (the check is a guard only).
 */
const REMEMBERED = 4096;

export class GoneClients {
  private readonly ids = new Set<string>();

  clear(): void {
    this.ids.clear();
  }

  /** `reqId`'s client hung up and the request settled unreplied. */
  add(reqId: string): void {
    this.ids.add(reqId);
    if (this.ids.size > REMEMBERED) this.ids.delete(this.ids.values().next().value as string);
  }

  /** A new request under a gone id (runtimes use unique ids, but a reuse is then a new request). */
  reopened(reqId: string): void {
    this.ids.delete(reqId);
  }

  /** Invariant: no effect of this step replies to a request whose client is gone. */
  check(out: readonly Effect[]): void {
    if (this.ids.size === 0) return;
    for (const e of out)
      if (e.type === "reply")
        invariant(!this.ids.has(e.reqId), () => `a reply for ${e.reqId}, whose client hung up`);
  }
}
