/**
 * What the runtime's answer to `verify-member` does (owned by one Swim, swim.ts): a candidate
 * verified joins the member table (or a tombstone comes back alive); one refused stays out
 * (candidates.ts remembers it). Its own file: admission is one job, beside applying updates.
 */
import type { Broadcasts } from "./broadcasts.js";
import type { Candidates } from "./candidates.js";
import type { SwimConfig } from "./config.js";
import { Disowned } from "./disowned.js";
import type { Member, MemberTable } from "./members.js";
import { ownWord } from "./own-word.js";
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
  /**
   * Live members whose new life is being checked: id → the incarnation that brought the check. At
   * most `maxCandidates`, as candidates' checks, each kept until answered (the member may have died
   * meanwhile): both together fit the runtime's bound (config.ts MAX_CANDIDATES), past which it
   * answers "busy", a refusal; a newer life told meanwhile is checked once it is answered (`verified`).
   */
  private readonly lives = new Map<NodeId, number>();
  /** New lives waiting for a check slot, oldest first: id → the incarnation told, pruned to live ones. */
  private readonly waiting = new Map<NodeId, number>();
  /** Claims taken down to the member's own word: their copies are not new lives again (disowned.ts). */
  private readonly disowned: Disowned;
  /**
   * Lives passed by a check that read no word (a hello not settled yet: swim.ts `saidIncarnation`): id →
   * the life held and when to check it once more (undefined: asked). Unchecked, a forgery told in a
   * restart's first moments stood; once settled, the member's word takes it down (own-word.ts).
   * At most `maxMembers`, oldest dropped; the re-check takes a check slot as any check does.
   */
  private readonly unsaid = new Map<NodeId, { life: number; due: number | undefined }>();

  constructor(private readonly p: AdmissionParts) {
    this.disowned = new Disowned(p.config.recheckAfterChangeMs, p.config.maxMembers);
  }

  /**
   * Live member `m` heard at `incarnation`, alive or suspect, before that news is taken. A restart
   * within its suspicion time is never held dead, so it would be taken on gossip alone: any rise but
   * a refutation (exactly one more, held suspect here or not: a suspicion we never heard of) is a new
   * life, checked as a revival is, a suspicion's too (else the refutation that follows it would carry
   * the new life in unchecked). A process outbids its previous life's records by two (self-news.ts),
   * so a restart never rises by one. It stays a member meanwhile (a restart that passes costs
   * nothing); a refusal puts it out (`verified`). False: the news is not taken (not held, not spread),
   * a copy of a claim taken down, or any new life of that member within its re-check interval.
   */
  newLife(m: Member, incarnation: number, now: number, out: SwimEffect[]): boolean {
    if (incarnation <= m.incarnation + 1) return true;
    const say = this.disowned.verdict(m.id, incarnation, now);
    if (say !== "ignore") this.check(m.id, incarnation, out);
    return say === "check";
  }

  /**
   * The runtime's answer for `id`: a candidate's, or a live member's new life's (else ignored). `own`:
   * the incarnation the member itself said in the check (own-word.ts); none, the claim stands.
   */
  verified(id: NodeId, ok: boolean, now: number, out: SwimEffect[], reason?: string, own?: number): void {
    const { members, candidates, broadcasts, probes, stats } = this.p;
    const life = this.lives.get(id);
    this.lives.delete(id);
    this.promote(out);
    if (!candidates.has(id)) {
      if (life === undefined) return;
      const m = members.isLive(id) ? members.get(id) : undefined;
      if (!ok) this.refuseLive(id, life, now, out, reason);
      // The hello may have been read of `life`'s process: a newer life told meanwhile is checked now.
      else if (m !== undefined && m.incarnation > life) this.check(id, m.incarnation, out);
      else if (m !== undefined) this.ownLife(m, life, own, now, out);
      return;
    }
    const settled = candidates.settle(id, ok, now, out, reason);
    if (settled === undefined) return;
    const { announce } = settled;
    const incarnation = ownWord(settled.incarnation, own);
    if (incarnation < settled.incarnation) {
      stats.implausibleIncarnations++;
      this.disowned.disown(id, settled.incarnation, now);
    } else this.disowned.vouched(id, incarnation);
    const m = members.get(id);
    if (m !== undefined) {
      // A tombstone verified back, unless newer news of its end came meanwhile (dead outranks alive);
      // one put out by us alone never died at its incarnation (a re-check's ping names none).
      if (members.isLive(id) || (incarnation <= m.incarnation && m.putOut !== true)) return;
      stats.verified++;
      // One put out by us may be held at a claim it never made (refused before its check could pass).
      m.incarnation = ownWord(Math.max(incarnation, m.incarnation), own);
      members.setStatus(m, "alive", now, out);
      broadcasts.push({ id, status: "alive", incarnation: m.incarnation });
      // A revival (a first admission has no earlier life whose records a forgery would outbid).
      if (own === undefined) this.recheckLater(id, m.incarnation, now);
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

  /**
   * A live member's new life `life` verified: held at what it said of itself if the claim was above it
   * (forged), and the claim disowned. Held while checked, our queued record of it was that claim:
   * replaced, so we stop spreading it (a suspect's suspicion is left to its refutation, which the lower
   * incarnation now lets in). A re-check of a disowned claim held nothing: a life it confirms is taken.
   */
  private ownLife(m: Member, life: number, own: number | undefined, now: number, out: SwimEffect[]): void {
    if (own === undefined) this.recheckLater(m.id, life, now);
    // Only its own life's: a word on a claim not held (disowned) leaves the one held to its re-check.
    else if (this.unsaid.get(m.id)?.life === life) this.unsaid.delete(m.id);
    const held = m.incarnation === life;
    const inc = ownWord(life, own);
    if (inc < life) {
      this.p.stats.implausibleIncarnations++;
      this.disowned.disown(m.id, life, now);
    } else this.disowned.vouched(m.id, life);
    if (held ? inc === m.incarnation : inc <= m.incarnation) return;
    m.incarnation = inc;
    if (!held) this.p.members.setStatus(m, "alive", now, out);
    if (m.status === "alive") this.p.broadcasts.push({ id: m.id, status: "alive", incarnation: inc });
  }

  /** `life` of `id` passed with no word: checked once more after `recheckAfterChangeMs` (`recheckDue`). */
  private recheckLater(id: NodeId, life: number, now: number): void {
    const u = this.unsaid.get(id);
    // Asked once of this life and still no word (a node before own-word, the simulator): done.
    if (u !== undefined && u.due === undefined && u.life === life) return void this.unsaid.delete(id);
    this.unsaid.delete(id);
    this.unsaid.set(id, { life, due: now + this.p.config.recheckAfterChangeMs });
    if (this.unsaid.size > this.p.config.maxMembers)
      this.unsaid.delete(this.unsaid.keys().next().value as NodeId);
  }

  /**
   * On the gossip tick: lives due a re-check (above) checked again. One no longer held goes, asked or
   * not: a newer life was checked as such, a lower one taken down, a member gone needs none.
   */
  recheckDue(now: number, out: SwimEffect[]): void {
    for (const [id, u] of this.unsaid) {
      const m = this.p.members.get(id);
      if (m === undefined || !this.p.members.isLive(id) || m.incarnation !== u.life) this.unsaid.delete(id);
      // Asked only once a check of its own starts: one in flight may have read the hello before.
      else if (u.due !== undefined && u.due <= now && this.check(id, u.life, out)) u.due = undefined;
    }
  }

  /** False: `id` is being checked or waits for a slot already (that check stands for this one). */
  private check(id: NodeId, incarnation: number, out: SwimEffect[]): boolean {
    if (this.lives.has(id) || this.waiting.has(id) || this.p.candidates.has(id)) return false;
    // Waiting lives of members no longer live go once the map fills (a check would change nothing).
    // Those in flight stay until answered: the runtime answers every check, but runs one we forgot
    // till then, so a slot freed here let more than its bound run at once (answered "busy").
    const live = this.p.members.live.length;
    if (this.waiting.size >= Math.min(live, this.p.config.maxCandidates))
      for (const k of this.waiting.keys()) if (!this.p.members.isLive(k)) this.waiting.delete(k);
    this.waiting.set(id, incarnation);
    this.promote(out);
    return true;
  }

  /** Waiting lives into free check slots, each at the newest life told (members no longer live: none). */
  private promote(out: SwimEffect[]): void {
    for (const [id, told] of this.waiting) {
      if (this.lives.size >= this.p.config.maxCandidates) break;
      this.waiting.delete(id);
      const m = this.p.members.get(id);
      if (m === undefined || !this.p.members.isLive(id)) continue;
      this.lives.set(id, Math.max(told, m.incarnation));
      out.push({ type: "verify-member", id });
    }
  }

  /**
   * A live member whose new life failed our check: dead to us (its estimate dropped, no longer
   * probed or routed to) and refused, so only a higher incarnation or its backoff asks again. Ours
   * alone: no death is said of it (others check it themselves), and push-pull lists leave it out.
   */
  private refuseLive(id: NodeId, life: number, now: number, out: SwimEffect[], reason?: string): void {
    const m = this.p.members.get(id);
    if (m === undefined || !this.p.members.isLive(id)) return;
    // Refused under the life checked: a newer one told meanwhile is evidence of change, so it is
    // asked about at the re-check floor (named now, remembered if too soon), not after the backoff.
    this.p.candidates.refuse(id, life, now, reason);
    this.p.members.setStatus(m, "dead", now, out);
    m.putOut = true;
    if (m.incarnation > life) this.p.candidates.name(id, m.incarnation, now, out);
  }
}
