/**
 * What the run loop's parts (run.ts and the files it wires: setup.ts, clients.ts, effects.ts,
 * oracle-sync.ts, traffic.ts, totals.ts) share: the events on the agenda and each node's simulated
 * host (the node, its engine, its timers and runs).
 */
import type { EngineResult } from "../core/engine.js";
import type { PrefixNode } from "../core/node/node.js";
import type { MeshMessage, PeerMessage, Timer } from "../core/node/types.js";
import type { CostProfile } from "../engines/sim/profiles.js";
import { SimEngine } from "../engines/sim/sim-engine.js";
import type { EventQueue, SimEvent } from "./event-queue.js";
import type { SimNodeSummary } from "./types.js";

export type Ev = SimEvent &
  (
    | { k: "deliver"; to: number; inc: number; from: number; msg: PeerMessage; sentAt: number }
    | { k: "mesh"; to: number; inc: number; from: number; msg: MeshMessage }
    | { k: "verified"; node: number; inc: number; id: string; ok: boolean }
    /** A member check's next try (hello-tries.ts): its address did not answer the last. */
    | { k: "verify"; node: number; inc: number; id: string; attempt: number }
    | { k: "timer"; node: number; inc: number; timer: Timer; key: string; token: number }
    /** A run ends: as modelled, or (`abort`) at once, the node having asked (abort-runs.ts). */
    | { k: "engine"; node: number; inc: number; jobId: string; fail: boolean; abort?: true }
    | { k: "submit"; req: number }
    /** The client of a request hangs up (faults/client.ts, `abandon`). */
    | { k: "gone"; req: number }
    | { k: "crash"; node: number }
    | { k: "restart"; node: number }
    | { k: "probe" }
  );

export type Agenda = EventQueue<Ev>;

/** An engine run in progress: what to cache when it ends, and when it started (aborts). */
export interface SimRun {
  tokens: Uint32Array;
  cacheTokens: number;
  result: EngineResult;
  startedAt: number;
  aborted?: true;
}

export interface SimNodeState {
  idx: number;
  id: string;
  node: PrefixNode | null;
  inc: number;
  epoch: number;
  engine: SimEngine;
  timers: Map<string, number>;
  /** Client reqIds this node owes an answer to. */
  outstanding: Set<string>;
  /** Engine runs in progress, by jobId. */
  runs: Map<string, SimRun>;
  summary: SimNodeSummary;
}

/** Host `idx` before its first boot: no node yet, an empty engine. */
export function newNodeState(id: string, idx: number, profile: CostProfile, capacity: number): SimNodeState {
  return {
    idx,
    id,
    node: null,
    inc: 0,
    epoch: -1,
    engine: new SimEngine({ profile, capacityTokens: capacity }),
    timers: new Map(),
    outstanding: new Set(),
    runs: new Map(),
    summary: {
      id,
      entered: 0,
      served: 0,
      servedForPeers: 0,
      forwarded: 0,
      evictedTokens: 0,
      treeTokens: 0,
      crashes: 0,
    },
  };
}

/** The workload request a client reqId (`r<index>.<try>`) is a try of. */
export function requestIndex(reqId: string): number {
  return Number(reqId.slice(1, reqId.indexOf(".")));
}
