/**
 * The CRDT-like rule of the paper's §3.4 for peer estimates: state-based, single writer per estimate,
 * so applying snapshots is idempotent and order-insensitive per sender.
 *
 *  - (epoch, version) only moves forward: an older or duplicate snapshot never replaces a newer one.
 *  - A new epoch means the sender restarted with an empty cache: the old estimate is dropped at once,
 *    and our estimate is then that epoch's version 0 (empty) until something newer arrives.
 *  - A delta applies only on top of exactly its baseVersion; otherwise the caller should ask for (or
 *    wait for) a full snapshot: "need-full".
 *
 * The snapshot's version is `header.version` (the codec guarantees a delta's `version` equals it).
 *
 * Large full snapshots (more than `stepKeys` keys, when set) are applied in steps (`step`), one sender
 * at a time: the held (epoch, version) moves only when the whole body is in, and until then the sender
 * matches nothing (PeerIndex hides it). A snapshot of a sender whose apply is staged or queued waits
 * ("deferred"): only the newest waits per sender, and it is applied after the staged one, by the same
 * rule, so (epoch, version) still only moves forward.
 */
import { invariant } from "./invariant.js";
import type { PeerIndex } from "./peer-index.js";
import { isNewer, type Snapshot, type SnapshotBody } from "./snapshot.js";

export type ApplyOutcome = "applied" | "stale" | "duplicate" | "need-full" | "deferred";

/** The (epoch, version) held per sender; the rest of its header is anti-entropy's (anti-entropy.ts). */
interface Held {
  epoch: number;
  version: number;
}

const RANK = { heartbeat: 0, delta: 1, full: 2 } as const;

const EMPTY_BODY = { blockSize: 0, keys: new Float64Array(0) };

export class Estimates {
  private readonly heldBy = new Map<string, Held>();
  /** The (epoch, version) the staged apply will hold once done. */
  private staged: { sender: string; epoch: number; version: number } | undefined;
  /** Per sender, the newest snapshot waiting for the staged apply (insertion order = apply order). */
  private readonly waiting = new Map<string, Snapshot>();

  /** `stepKeys`: 0 = every snapshot applies at once; else fulls above it apply `stepKeys` at a time. */
  constructor(
    private readonly index: PeerIndex,
    private readonly stepKeys = 0,
  ) {}

  /** True while a staged apply or a waiting snapshot needs `step` calls. */
  get busy(): boolean {
    return this.staged !== undefined || this.waiting.size > 0;
  }

  apply(s: Snapshot): ApplyOutcome {
    const h = s.header;
    if (this.staged?.sender === h.sender || this.waiting.has(h.sender)) return this.defer(s);
    // One staged apply at a time: another large one waits its turn.
    if (this.staged !== undefined && this.needsSteps(s)) return this.defer(s);
    return this.applyNow(s);
  }

  /** Whether applying `s` now would replace more than `stepKeys` keys of the sender's estimate. */
  private needsSteps(s: Snapshot): boolean {
    if (this.stepKeys === 0) return false;
    const h = s.header;
    const cur = this.heldBy.get(h.sender);
    const dropsOld = cur === undefined || h.epoch > cur.epoch || s.kind === "full";
    const oldKeys = dropsOld ? this.index.estimateSize(h.sender) / this.index.blockSize : 0;
    return (s.kind === "full" ? s.body.keys.length : 0) + oldKeys > this.stepKeys;
  }

  /**
   * About `stepKeys` keys of staged work; when the staged apply completes, its (epoch, version) is
   * held and waiting snapshots are applied (which may stage the next). Returns the outcomes of the
   * waiting snapshots applied in this step, by sender.
   */
  step(): { sender: string; outcome: ApplyOutcome }[] {
    const done: { sender: string; outcome: ApplyOutcome }[] = [];
    if (this.staged !== undefined) {
      if (!this.index.stepReplace(this.stepKeys)) return done;
      const { sender, epoch, version } = this.staged;
      this.staged = undefined;
      const cur = this.heldBy.get(sender);
      // A sender removed meanwhile has no held state and its staged apply is gone with it.
      if (cur !== undefined) {
        invariant(cur.epoch === epoch && cur.version <= version, () => `staged ${sender} moved back`);
        cur.version = version;
      }
    }
    for (const [sender, s] of this.waiting) {
      this.waiting.delete(sender);
      done.push({ sender, outcome: this.applyNow(s) });
      if (this.staged !== undefined) break;
    }
    return done;
  }

  private defer(s: Snapshot): ApplyOutcome {
    const h = s.header;
    const staged = this.staged?.sender === h.sender ? this.staged : undefined;
    const waiting = this.waiting.get(h.sender);
    const newest = waiting?.header ?? staged ?? this.heldBy.get(h.sender);
    // At one (epoch, version) a full beats a delta beats a heartbeat (what it can apply).
    const beatsWaiting = waiting !== undefined && RANK[s.kind] > RANK[waiting.kind];
    if (newest !== undefined && !isNewer(h, newest)) {
      const same = h.epoch === newest.epoch && h.version === newest.version;
      if (!(same && beatsWaiting)) return same ? "duplicate" : "stale";
    }
    this.waiting.delete(h.sender);
    this.waiting.set(h.sender, s);
    return "deferred";
  }

  /** Replaces `sender`'s estimate, in steps if the body is large (the held version moves when done). */
  private replace(sender: string, held: Held, version: number, body: SnapshotBody): void {
    const oldKeys = this.index.estimateSize(sender) / this.index.blockSize;
    if (this.stepKeys > 0 && body.keys.length + oldKeys > this.stepKeys) {
      invariant(this.staged === undefined, () => `${sender} staged while ${this.staged?.sender} is`);
      this.index.beginReplace(sender, body);
      this.staged = { sender, epoch: held.epoch, version };
      return;
    }
    this.index.replaceEstimate(sender, body);
    held.version = version;
  }

  /**
   * A full snapshot at the version we hold: the truth at that version (it repairs an estimate an
   * optimistic insert polluted). Staged like any large full.
   */
  repair(s: Snapshot & { kind: "full" }): void {
    const sender = s.header.sender;
    const cur = this.heldBy.get(sender);
    if (cur === undefined || this.staged?.sender === sender || this.waiting.has(sender)) return;
    if (this.staged !== undefined && this.needsSteps(s)) return;
    this.replace(sender, cur, cur.version, s.body);
  }

  private applyNow(s: Snapshot): ApplyOutcome {
    const h = s.header;
    const cur = this.heldBy.get(h.sender);
    if (cur !== undefined && h.epoch < cur.epoch) return "stale";
    if (cur === undefined || h.epoch > cur.epoch) return this.newEpoch(s);
    const version = cur.version;
    const outcome = this.sameEpoch(s, cur);
    invariant(cur.version >= version, () => `estimate of ${h.sender} moved back from version ${version}`);
    return outcome;
  }

  /** What `peer`'s entry holds now, not a copy (read it at once: it moves as states apply). */
  heldNow(peer: string): Readonly<Held> | undefined {
    return this.heldBy.get(peer);
  }

  /** The (epoch, version) of `peer` we hold, if any. */
  held(peer: string): { epoch: number; version: number } | undefined {
    const cur = this.heldBy.get(peer);
    return cur === undefined ? undefined : { epoch: cur.epoch, version: cur.version };
  }

  remove(peer: string): void {
    this.heldBy.delete(peer);
    this.waiting.delete(peer);
    if (this.staged?.sender === peer) this.staged = undefined;
    this.index.removePeer(peer);
  }

  private newEpoch(s: Snapshot): ApplyOutcome {
    const h = s.header;
    // Restarted (or first contact): whatever we believed is gone; the epoch's version 0 is empty.
    const held: Held = { epoch: h.epoch, version: 0 };
    this.heldBy.set(h.sender, held);
    if (s.kind === "full") {
      this.replace(h.sender, held, h.version, s.body);
      return this.staged?.sender === h.sender ? "deferred" : "applied";
    }
    this.replace(h.sender, held, 0, { ...EMPTY_BODY, blockSize: this.index.blockSize });
    // A large old estimate is being dropped in steps: the update waits until it is gone.
    if (this.staged?.sender === h.sender) return this.defer(s);
    if (s.kind === "delta" && s.delta.baseVersion === 0) {
      this.index.applyDelta(h.sender, s.delta);
      held.version = h.version;
      return "applied";
    }
    if (s.kind === "heartbeat" && h.version === 0) return "applied";
    return "need-full";
  }

  private sameEpoch(s: Snapshot, cur: Held): ApplyOutcome {
    const v = s.header.version;
    if (v < cur.version) return "stale";
    if (v === cur.version) return "duplicate";
    switch (s.kind) {
      case "full":
        this.replace(s.header.sender, cur, v, s.body);
        return this.staged?.sender === s.header.sender ? "deferred" : "applied";
      case "delta":
        if (s.delta.baseVersion !== cur.version) return "need-full";
        this.index.applyDelta(s.header.sender, s.delta);
        cur.version = v;
        return "applied";
      case "heartbeat":
        return "need-full";
    }
  }
}
