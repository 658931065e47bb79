/**
 * What the runtime's answer to `verify-member` does (owned by one Swim, swim.ts): a candidate
 * verified joins the member table (or a tombstone comes back alive); one refused stays out
 * (candidates.ts remembers it). Its own file: admission is one job, beside applying updates.
 */
import type { Broadcasts } from "./broadcasts.js";
import type { Candidates } from "./candidates.js";
import type { SwimConfig } from "./config.js";
import type { MemberTable } from "./members.js";
import type { ProbeCycle } from "./probe-cycle.js";
import type { PushPull } from "./push-pull.js";
import type { NodeId, SwimEffect, SwimStats } from "./types.js";

export interface AdmissionParts {
  config: SwimConfig;
  members: MemberTable;
  candidates: Candidates;
  broadcasts: Broadcasts;
  probes: ProbeCycle;
  pushPull: PushPull;
  stats: SwimStats;
}

export class Admissions {
  constructor(private readonly p: AdmissionParts) {}

  /** The runtime's answer for `id` (a candidate's, else ignored). */
  verified(id: NodeId, ok: boolean, now: number, out: SwimEffect[], reason?: string): void {
    const { members, candidates, broadcasts, probes, stats } = this.p;
    const { incarnation, announce } = candidates.settle(id, ok, now, out, reason) ?? {};
    if (incarnation === undefined) return;
    const m = members.get(id);
    if (m !== undefined) {
      // A tombstone verified back, unless newer news of its end came meanwhile (dead outranks alive).
      if (members.isLive(id) || incarnation <= m.incarnation) return;
      stats.verified++;
      m.incarnation = incarnation;
      members.setStatus(m, "alive", now, out);
      broadcasts.push({ id, status: "alive", incarnation });
      // Into the pass under way: left to the next shuffle, a revived member went a pass unprobed.
      probes.admit(id);
      return;
    }
    if (members.size >= this.p.config.maxMembers) return;
    stats.verified++;
    members.add(id, incarnation, now, out);
    broadcasts.push({ id, status: "alive", incarnation });
    probes.admit(id);
    this.p.pushPull.admitted(id, announce === true, out);
  }
}
