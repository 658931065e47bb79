/**
 * Fault schedules drawn from a seed: one seed gives one reproducible schedule of every fault class,
 * by the component it hits (faults/network.ts, faults/engine.ts, faults/node.ts: each holds its
 * classes' shape, draw, flags, checks and run-time model, so adding a fault class means its component
 * file plus its `prefixmesh sim` flag). Each class is present or not, and every probability, time,
 * window and group is drawn. The draws come from a stream of their own (not the simulation's), so the
 * same seed can drive the run, the workload and its faults without the three being correlated.
 */
import { hashString, Prng } from "../core/prng.js";
import { checkClientFaults, clientFaultFlags } from "./faults/client.js";
import { FaultDraw } from "./faults/draw.js";
import { checkEngineFaults, drawEngineFaults, engineFaultFlags } from "./faults/engine.js";
import {
  checkNetworkFaults,
  drawNetworkFaults,
  networkFaultFlags,
  networkFaultsEnd,
} from "./faults/network.js";
import { checkNodeFaults, drawNodeFaults, nodeFaultFlags, nodeFaultsEnd } from "./faults/node.js";
import type { SimFaults } from "./types.js";

/** A fault schedule over [0, durationMs) of virtual time for `nodes` nodes, drawn from `seed`. */
export function faultScheduleFor(seed: number, nodes: number, durationMs: number): SimFaults {
  if (!Number.isFinite(seed)) throw new RangeError(`seed must be a number, got ${seed}`);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 1024)
    throw new RangeError(`nodes must be 1-1024, got ${nodes}`);
  if (!(durationMs >= 1 && Number.isFinite(durationMs)))
    throw new RangeError(`durationMs must be ≥ 1 and finite, got ${durationMs}`);
  const draw = new FaultDraw(new Prng(hashString(`fault-schedule:${seed}`)), durationMs);
  // One stream, drawn in this order: network, engine, node (a seed's schedule depends on it).
  const network = drawNetworkFaults(draw, nodes);
  const engine = drawEngineFaults(draw, nodes);
  const node = drawNodeFaults(draw, nodes);
  const faults: SimFaults = {};
  if (Object.keys(network).length > 0) faults.network = network;
  if (Object.keys(engine).length > 0) faults.engine = engine;
  if (Object.keys(node).length > 0) faults.node = node;
  return faults;
}

/**
 * The schedule as `prefixmesh sim` flags (`--loss 0.05 --crash 1@830:1900 …`): what a failing seed
 * prints, readable and replayable as it stands. Empty for no faults.
 */
export function faultFlags(f: SimFaults | undefined): string[] {
  return [
    ...networkFaultFlags(f?.network ?? {}),
    ...engineFaultFlags(f?.engine ?? {}),
    ...nodeFaultFlags(f?.node ?? {}),
    ...clientFaultFlags(f?.client ?? {}),
  ];
}

/** Throws (through `bad`) on a fault that names no node of the run, or a value out of its range. */
export function checkFaults(
  f: SimFaults,
  nodes: number,
  bad: (m: string) => never,
  requests = Number.POSITIVE_INFINITY,
): void {
  checkNetworkFaults(f.network ?? {}, bad);
  checkClientFaults(f.client ?? {}, requests, bad);
  checkEngineFaults(f.engine ?? {}, nodes, bad);
  checkNodeFaults(f.node ?? {}, nodes, bad);
}

/**
 * When the last fault is over (infinite for link faults without an end). A slowed engine is not a
 * fault convergence waits out: anti-entropy runs at any engine speed.
 */
export function faultsEnd(f: SimFaults): number {
  return Math.max(networkFaultsEnd(f.network ?? {}), nodeFaultsEnd(f.node ?? {}));
}
