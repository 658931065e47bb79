/**
 * Resynchronization: an aborted run reads `GET /slots` before its abort is reported (so the tree
 * mirrors what the server kept of it); after a failed run, an abort whose slot was still busy at the
 * server, or a prediction the server contradicts, the next run first reads it (when the server
 * exposes it): each idle slot's token count corrects the
 * mirror, and a slot that has never run a task (or a task counter that went back) while the mirror
 * holds tokens says the server restarted: the mirror is cleared, RAM cache included.
 */
import type { HttpClient } from "../http-client.js";
import { AbortReadBack, type ReadVerdict } from "./abort-read-back.js";
import { readSlots, type ServerSlots } from "./server-api.js";
import type { SlotMirror } from "./slot-mirror.js";
import type { LaunchLock } from "./turns.js";

/** What a read of `/slots` changes in the slot cache. */
export interface ResyncTarget {
  /** The tokens each slot holds in the mirror the node follows. */
  slotTokens(): number[];
  /** Changes every mirror alike. */
  each(fn: (m: SlotMirror) => void): void;
  /** Before the mirrors change. */
  changing(): void;
  /** The server restarted: what it ran before the node no longer matters. */
  restarted(): void;
}

export class SlotResync {
  /** Set when the next run must read `/slots` first. */
  needed = false;
  private reading: Promise<void> | undefined;
  /** `/slots` read back after an abort (abort-read-back.ts). */
  readonly abortReads: AbortReadBack;
  private readonly lastTask: (number | undefined)[];
  /**
   * Runs the server started (their response began), and the count at which its task ids began: every
   * run takes a task id, so while the server lives its latest id is at least started − base − 1.
   */
  private started = 0;
  private taskBase = 0;
  resyncs = 0;
  restarts = 0;

  constructor(
    private readonly http: HttpClient,
    private readonly slotsEndpoint: boolean,
    slots: number,
    /** The slots running here. */
    private readonly busy: ReadonlySet<number>,
    private readonly launches: LaunchLock,
    private readonly target: ResyncTarget,
  ) {
    this.lastTask = new Array<number | undefined>(slots).fill(undefined);
    // A prefill the abort cut short goes on at most as long as the engine waits on a silent server.
    this.abortReads = new AbortReadBack(http.silenceBoundMs, () => this.readAborted());
  }

  /** A run's response began: the server took a task id for it. */
  began(): void {
    this.started++;
  }

  /** Reads `/slots` into the mirror (one at a time); a failure leaves the flag set for the next run. */
  read(): Promise<void> {
    this.reading ??= (async () => {
      try {
        const slots = await readSlots(this.http, this.slotsEndpoint);
        this.needed = false;
        if (slots) this.apply(slots);
      } catch {
        // The server is down: the run itself will say so; try again next time.
      } finally {
        this.reading = undefined;
      }
    })();
    return this.reading;
  }

  /**
   * One read of `/slots` after an abort (abort-read-back.ts): idle once every slot not running here is
   * idle at the server. It holds the launch lock, like every read before a start, so starts and reads
   * reach the server in the mirror's order. A slot still busy when the reads end, or a failed read,
   * leaves the flag set: the next run reads again.
   */
  private async readAborted(): Promise<ReadVerdict> {
    const unlock = await this.launches.lock();
    try {
      const slots = await readSlots(this.http, this.slotsEndpoint);
      if (!slots) return "stop";
      this.apply(slots);
      if (slots.some((s) => s.is_processing && !this.busy.has(s.id))) return "busy";
      this.needed = false;
      return "idle";
    } catch {
      // The server is down: the next run says so, and reads /slots first.
      return "stop";
    } finally {
      unlock();
    }
  }

  apply(slots: ServerSlots): void {
    this.resyncs++;
    // The worlds change here: a start's saved worlds can no longer be replayed.
    this.target.changing();
    const known = this.target.slotTokens();
    const latest = slots.reduce<number | undefined>(
      (m, s) => (s.id_task === undefined ? m : Math.max(m ?? -1, s.id_task)),
      undefined,
    );
    // Task ids restarted (fewer than the runs it started since), or a slot never ran one while the
    // mirror holds tokens there: a new server.
    const restarted =
      (latest ?? -1) < this.started - this.taskBase - 1 ||
      slots.some((s) => {
        const last = this.lastTask[s.id];
        return (
          (s.id_task === undefined && (known[s.id] ?? 0) > 0) ||
          (last !== undefined && (s.id_task === undefined || s.id_task < last))
        );
      });
    // Every task the server ran counts as one of ours (the bound stays true without a restart).
    if (restarted || this.resyncs === 1) this.taskBase = this.started - (latest ?? -1) - 1;
    if (restarted) {
      this.restarts++;
      this.target.restarted();
      // A slot that ran a task on the new server ran one of ours since: the mirror holds it already.
      const ran = new Set(slots.filter((s) => s.id_task !== undefined).map((s) => s.id));
      this.target.each((m) => m.clear(ran));
    }
    const lengths: (number | undefined)[] = [];
    for (const s of slots) {
      this.lastTask[s.id] = s.id_task;
      if (!s.is_processing && !this.busy.has(s.id))
        lengths[s.id] = s.id_task === undefined ? 0 : s.n_prompt_tokens;
    }
    this.target.each((m) => m.resync(lengths));
  }
}
