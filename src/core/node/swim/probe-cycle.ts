/**
 * SWIM's probe cycle (owned by one Swim, swim.ts): each period one member is pinged; no ack within
 * the timeout → ping-req through k members (and memberlist's fallback ping); no ack by the period's
 * end → re-probed next period, and suspected after `probeAttempts` failed periods in a row. It also
 * relays the ping-reqs others send us (our pings share one seq space) and keeps Lifeguard's local
 * health, which stretches the period and timeout. Its own file because failure detection is one job,
 * apart from what Swim does with the beliefs (updates, join, push-pull); the suspicion it raises
 * goes back through Swim's `suspect`, applied like any other update.
 */
import type { Broadcasts } from "./broadcasts.js";
import type { SwimConfig } from "./config.js";
import type { MemberTable } from "./members.js";
import { ProbeOrder } from "./probe-order.js";
import { Relays } from "./relays.js";
import type { MemberUpdate, NodeId, SwimEffect, SwimStats } from "./types.js";

interface Probe {
  seq: number;
  target: NodeId;
  sentAt: number;
  /** The direct ack was late: the probe went indirect (its round trip is no RTT sample). */
  indirect: boolean;
  acked: boolean;
  expectedNacks: number;
  nacks: number;
}

/** What the probe cycle needs of its Swim (the piggyback queue's take, the update rule). */
export interface ProbeHost {
  piggyback(first?: MemberUpdate): MemberUpdate[];
  /** Our own probes failed: the suspicion `u`, applied as any trusted update. */
  suspect(u: MemberUpdate, now: number, out: SwimEffect[]): void;
}

export class ProbeCycle {
  private readonly relays = new Relays();
  private readonly order: ProbeOrder;
  private probe: Probe | undefined;
  /** A member whose probe period just failed, re-probed next before it is suspected, and its failures. */
  private retry: { target: NodeId; failed: number } | undefined;
  private seq = 0;
  /** Lifeguard's local health (0 = healthy): period and timeout stretch by (1 + it). */
  private awareness = 0;

  constructor(
    private readonly selfId: NodeId,
    private readonly config: SwimConfig,
    private readonly members: MemberTable,
    private readonly broadcasts: Broadcasts,
    private readonly stats: SwimStats,
    random: () => number,
    private readonly host: ProbeHost,
  ) {
    this.order = new ProbeOrder(random);
  }

  get localHealth(): number {
    return this.awareness;
  }

  health(delta: number): void {
    this.awareness = Math.min(this.config.awarenessMax - 1, Math.max(0, this.awareness + delta));
  }

  /** The probe period, stretched by local health. */
  periodMs(): number {
    return this.scaled(this.config.probeIntervalMs);
  }

  /** A verified member, new or back from dead or left: probed later in this pass (not the next). */
  admit(id: NodeId): void {
    this.order.insert(id);
  }

  /** Pings the next member (or the one being retried) and arms the probe timeout. */
  start(now: number, out: SwimEffect[]): void {
    const retry = this.retry;
    const target =
      retry !== undefined && this.members.isLive(retry.target) ? retry.target : this.nextTarget();
    if (target !== retry?.target) this.retry = undefined;
    if (target === undefined) return;
    const seq = ++this.seq;
    this.probe = { seq, target, sentAt: now, indirect: false, acked: false, expectedNacks: 0, nacks: 0 };
    this.stats.probes++;
    // Lifeguard's buddy system: a suspect hears of its suspicion first, so it can refute at once —
    // stated afresh (as memberlist does), since the queued update may have run out of retransmits.
    const t = this.members.get(target);
    const buddy: MemberUpdate | undefined =
      t?.status === "suspect"
        ? (this.broadcasts.about(target) ?? { id: target, status: "suspect", incarnation: t.incarnation })
        : undefined;
    out.push({ type: "send", to: target, msg: { type: "ping", seq, updates: this.host.piggyback(buddy) } });
    out.push({
      type: "set-timer",
      timer: { kind: "swim-probe-timeout", seq },
      delayMs: this.scaled(this.config.probeTimeoutMs),
    });
  }

  /** An ack: ours (an RTT sample when direct) or the target's answer to a ping we relay. */
  onAck(from: NodeId, seq: number, now: number, out: SwimEffect[]): void {
    const p = this.probe;
    if (p !== undefined && p.seq === seq) {
      if (!p.acked && !p.indirect && from === p.target)
        out.push({ type: "rtt", id: from, ms: now - p.sentAt });
      p.acked = true;
      return;
    }
    const r = this.relays.close(seq);
    if (r !== undefined)
      out.push({ type: "send", to: r.origin, msg: { type: "ack", seq: r.originSeq, updates: [] } });
  }

  onNack(seq: number): void {
    if (this.probe !== undefined && this.probe.seq === seq) this.probe.nacks++;
  }

  /** The probe timeout: no direct ack yet → ask k members to ping the target for us. */
  goIndirect(seq: number, out: SwimEffect[]): void {
    const p = this.probe;
    if (p === undefined || p.seq !== seq || p.acked) return;
    const relays = this.members.pick(this.config.indirectChecks, (id) => id !== p.target);
    for (const to of relays)
      out.push({
        type: "send",
        to,
        msg: { type: "ping-req", seq, target: p.target, updates: this.host.piggyback() },
      });
    // memberlist's fallback ping (over TCP there): a second direct try beside the indirect ones, so
    // one lost datagram on our own link does not make a live member suspect.
    if (this.config.fallbackPing)
      out.push({ type: "send", to: p.target, msg: { type: "ping", seq, updates: [] } });
    p.indirect = true;
    p.expectedNacks = relays.length;
    this.stats.indirectProbes += relays.length;
  }

  /** Someone's ping-req: we ping the target and answer it ack (relayed) or nack (our timeout). */
  relay(origin: NodeId, originSeq: number, target: NodeId, out: SwimEffect[]): void {
    if (this.relays.full || target === this.selfId) return;
    const seq = ++this.seq;
    this.relays.open(seq, { origin, originSeq });
    out.push({ type: "send", to: target, msg: { type: "ping", seq, updates: this.host.piggyback() } });
    out.push({
      type: "set-timer",
      timer: { kind: "swim-relay-timeout", seq },
      delayMs: this.config.probeTimeoutMs,
    });
  }

  /** Our relayed ping went unanswered: the prober hears a nack (Lifeguard). */
  relayTimeout(seq: number, out: SwimEffect[]): void {
    const r = this.relays.close(seq);
    if (r !== undefined) out.push({ type: "send", to: r.origin, msg: { type: "nack", seq: r.originSeq } });
  }

  /**
   * The probe period is over: acked → healthier; else re-probe the target next period, and suspect it
   * once `probeAttempts` periods in a row have failed (Lifeguard's accounting on each).
   */
  finish(now: number, out: SwimEffect[]): void {
    const p = this.probe;
    if (p === undefined) return;
    this.probe = undefined;
    if (p.acked) {
      this.retry = undefined;
      this.health(-1);
      return;
    }
    // Relays that did not even nack point at our own links: our health, not the target's.
    this.health(p.expectedNacks > 0 ? p.expectedNacks - p.nacks : 1);
    const m = this.members.get(p.target);
    if (m === undefined || m.status !== "alive") {
      this.retry = undefined;
      // Lifeguard: our failed probe of a suspect raised by another confirms it (shortens its timeout).
      if (m?.status === "suspect" && this.members.confirm(m, this.selfId, true))
        this.broadcasts.push({ id: m.id, status: "suspect", incarnation: m.incarnation, from: this.selfId });
      return;
    }
    const failed = (this.retry?.target === p.target ? this.retry.failed : 0) + 1;
    if (failed < this.config.probeAttempts) {
      this.retry = { target: p.target, failed };
      return;
    }
    this.retry = undefined;
    this.host.suspect(
      { id: m.id, status: "suspect", incarnation: m.incarnation, from: this.selfId },
      now,
      out,
    );
  }

  private scaled(ms: number): number {
    return ms * (1 + this.awareness);
  }

  private nextTarget(): NodeId | undefined {
    return this.order.take(
      () => this.members.live,
      (id) => this.members.isLive(id),
    );
  }
}
