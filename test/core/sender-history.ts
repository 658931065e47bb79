/**
 * A snapshot sender's history for the estimate property tests (estimates, staged-estimates): a
 * random run of inserts, evictions and restarts on one sender's tree, and every snapshot it could
 * have sent on the way.
 */
import fc from "fast-check";
import type { Tokens } from "../../src/core/engine.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import type { Snapshot, SnapshotHeader } from "../../src/core/snapshot.js";
import { arbSeq } from "./ref-model.js";

export type SenderEvent = { k: "insert"; t: Tokens } | { k: "evict"; n: number } | { k: "restart" };

export const arbSenderEvent: fc.Arbitrary<SenderEvent> = fc.oneof(
  { weight: 5, arbitrary: arbSeq.map((t) => ({ k: "insert" as const, t })) },
  { weight: 2, arbitrary: fc.nat({ max: 60 }).map((n) => ({ k: "evict" as const, n })) },
  { weight: 1, arbitrary: fc.constant({ k: "restart" as const }) },
);

export interface SenderHistory {
  /** Per state: its full snapshot, a heartbeat, then a delta from each base `deltaBases` names. */
  sent: Snapshot[];
  /** The tree's keys at each `${epoch}:${version}` it went through. */
  bodies: Map<string, Set<number>>;
  /** The last full snapshot sent. */
  lastFull: Snapshot;
  /** The sender at the end. */
  tree: RadixTree;
  epoch: number;
}

/**
 * Plays `events` from epoch 1 and an empty tree (capacity 120), recording the start and the state
 * after each event; a restart at event `i` moves to epoch + `restartGap(i)` with an empty tree.
 */
export function senderHistory(
  events: readonly SenderEvent[],
  opts: {
    header: (epoch: number, tree: RadixTree) => SnapshotHeader;
    restartGap: (i: number) => number;
    deltaBases: (version: number) => number[];
  },
): SenderHistory {
  const sent: Snapshot[] = [];
  const bodies = new Map<string, Set<number>>();
  let epoch = 1;
  let tree = new RadixTree({ capacity: 120 });
  let lastFull: Snapshot | undefined;
  const record = () => {
    const h = opts.header(epoch, tree);
    bodies.set(`${epoch}:${tree.version}`, new Set(tree.snapshotBody().keys));
    lastFull = { kind: "full", header: h, body: tree.snapshotBody() };
    sent.push(lastFull, { kind: "heartbeat", header: h });
    for (const base of opts.deltaBases(tree.version)) {
      const d = base >= 0 ? tree.changesSince(base) : undefined;
      if (d !== undefined) sent.push({ kind: "delta", header: h, delta: d });
    }
  };
  record();
  for (const [i, ev] of events.entries()) {
    if (ev.k === "insert") tree.insert(ev.t, i);
    else if (ev.k === "evict") tree.evict(ev.n);
    else {
      epoch += opts.restartGap(i);
      tree = new RadixTree({ capacity: 120 });
    }
    record();
  }
  return { sent, bodies, lastFull: lastFull as Snapshot, tree, epoch };
}
