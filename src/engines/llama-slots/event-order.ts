/**
 * Order of events: a run's end and another's start come in on two connections, in either order
 * whatever the server's; where the order decides what the RAM cache holds, the mirror keeps both
 * worlds (worlds.ts) until a reported `cache_n` tells them apart. A start counts as begun at its
 * first event, whose prompt time bounds when the server started it (its headers come early in its
 * prefill, and an end that comes in after them had often reached the server first). The server's
 * own times rule out orders that cannot be: a run that ran longer than the time between its send
 * and another start's latest possible start was still running then.
 */
import type { SlotMirror } from "./slot-mirror.js";
import type { MirrorWorlds } from "./worlds.js";

/** A start sent: when (event clock), the slots running then, whether it began, and by when (ms). */
export interface StartRecord {
  at: number;
  slot: number;
  running: number[];
  launched: boolean;
  /** The latest time the server can have started it, once it began. */
  latestMs: number;
  /** The worlds before it, and its launch with more idle slots: to replay it after an earlier event. */
  before: ReturnType<MirrorWorlds["save"]>;
  relaunch: (m: SlotMirror, alsoIdle: readonly number[]) => number;
  /** The ends that came in since it was sent, and its own run's count once that ended. */
  since: EndRecord[];
  reported: number | undefined;
}

/** A run's end as `EventOrder.ended` took it: to replay it. */
interface EndRecord {
  slot: number;
  at: number;
  noEarlierMs: number;
  reported: number | undefined;
  finish: (m: SlotMirror) => void;
}

const CLOCK_MARGIN_MS = 1;
/**
 * The server's durations are read off its clock, the node's times off the node's: on another machine
 * the two may tick at rates apart by up to this share (NTP keeps them far closer), so a duration
 * counts for that much less when it rules an order out.
 */
const CLOCK_RATE_SLACK = 1e-3;

/** What of `serverMs` (a duration the server measured) surely passed on the node's clock. */
export function surelyElapsed(serverMs: number | undefined): number {
  return (serverMs ?? 0) * (1 - CLOCK_RATE_SLACK);
}

export class EventOrder {
  private events = 0;
  /** The latest start sent, and the one sent before it (and before that, should the latest be undone). */
  private lastStart: StartRecord | undefined;
  private prevStart: StartRecord | undefined;
  private olderStart: StartRecord | undefined;
  /** When each slot's last run ended, on the event clock. */
  private readonly endedAt: number[];
  /**
   * The earliest each slot's last run can have ended at the server (ms): sent then, plus the server's
   * own prompt and generation times.
   */
  private readonly endedNoEarlier: number[];

  /** `shadow`: the mirror with the other RAM-cache setting, while there is one (forks apply to it too). */
  constructor(
    slots: number,
    private readonly worlds: MirrorWorlds,
    private readonly shadow: () => SlotMirror | undefined,
  ) {
    this.endedAt = new Array<number>(slots).fill(0);
    this.endedNoEarlier = new Array<number>(slots).fill(0);
  }

  /** A start sent on `slot` while `running` went on; it becomes the latest start. */
  sent(
    slot: number,
    running: number[],
    before: StartRecord["before"],
    relaunch: StartRecord["relaunch"],
  ): StartRecord {
    const started: StartRecord = {
      at: ++this.events,
      slot,
      running,
      launched: false,
      latestMs: 0,
      before,
      relaunch,
      since: [],
      reported: undefined,
    };
    this.olderStart = this.prevStart;
    this.prevStart = this.lastStart;
    this.lastStart = started;
    return started;
  }

  /**
   * `started` never reached the server, and the worlds went back to their state before its launch:
   * the start before it is the latest again, else an end that comes in now is never ordered against
   * that start. The ends that came in meanwhile, which the undo took back, are taken again, now
   * against that start.
   */
  unsent(started: StartRecord): void {
    if (this.lastStart !== started) return;
    this.lastStart = this.prevStart;
    this.prevStart = this.olderStart;
    this.olderStart = undefined;
    for (const e of started.since) {
      this.worlds.each(e.finish);
      const shadow = this.shadow();
      if (shadow) e.finish(shadow);
      this.ended(e.slot, e.at, e.noEarlierMs, e.reported, e.finish);
    }
  }

  /** `started`'s first event came in, reporting `promptMs` of prefill. */
  began(started: StartRecord, promptMs: number | undefined): void {
    started.launched = true;
    // The server started it before its first event, and before the prompt time that event reports.
    started.latestMs = performance.now() - surelyElapsed(promptMs);
    // A run whose end came in after this one was sent, but before its first event, most likely
    // ended at the server before this one started (it was idle, and saved, then); its end may
    // also have overtaken this start on the way (worlds.ts). Not when the times rule it out.
    for (const o of started.running)
      if (this.endedAt[o]! > started.at && this.mayHaveEnded(o, started)) {
        this.worlds.fork((m) => m.idleSaved(o), true);
        this.shadow()?.idleSaved(o);
      }
  }

  /**
   * The run on `slot` launched at `at` ended, no earlier than `noEarlierMs` at the server, with
   * `reported` cached tokens (after the worlds took the report); `finish` is its end on a mirror.
   */
  ended(
    slot: number,
    at: number,
    noEarlierMs: number,
    reported: number | undefined,
    finish: (m: SlotMirror) => void,
  ): void {
    this.endedAt[slot] = ++this.events;
    this.endedNoEarlier[slot] = noEarlierMs;
    // A start that began while this run went on, though the server may have ended this run first
    // (the two responses travel apart): then this slot was idle, and saved, at that start. Nothing
    // has touched the RAM cache since that start's own idle saves, so saving it now is that.
    const last = this.lastStart;
    if (last?.launched && this.ranDuring(slot, at, last)) this.worlds.fork((m) => m.idleSaved(slot), false);
    // Or it ended before the start sent before that one: saved before the latest start chose what
    // to restore, which is replayed on each world's state from before it.
    const prev = this.prevStart;
    if (last && last.before.length > 0 && prev?.launched && this.ranDuring(slot, at, prev)) {
      this.worlds.forkBefore(
        last.before,
        (m) => {
          finish(m);
          m.idleSaved(slot);
        },
        { slot: last.slot, launch: (m) => last.relaunch(m, [slot]), reported: last.reported },
        last.since.map((e) => e.finish),
      );
    }
    if (last?.at === at) last.reported = reported;
    last?.since.push({ slot, at, noEarlierMs, reported, finish });
  }

  /** The worlds changed otherwise (a resync): the latest start's saved worlds can no longer be replayed. */
  resynced(): void {
    if (this.lastStart) this.lastStart.before = [];
  }

  /**
   * Whether the last run on `slot` can have ended at the server before `start` did: false when it
   * ran past the latest time the server can have started `start` (its times say so; the margin covers
   * rounding of the two clocks).
   */
  private mayHaveEnded(slot: number, start: StartRecord): boolean {
    return this.endedNoEarlier[slot]! <= start.latestMs + CLOCK_MARGIN_MS;
  }

  /** Whether the run on `slot` launched at `at` was going on when `start` was sent, and may have ended first. */
  private ranDuring(slot: number, at: number, start: StartRecord): boolean {
    return start.at > at && start.running.includes(slot) && this.mayHaveEnded(slot, start);
  }
}
