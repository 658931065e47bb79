/**
 * A hand-driven harness for PrefixNode tests: a shared manual clock, the real simulated engine
 * (src/sim, node-managed cache), messages held in a mailbox until the test delivers them, timers
 * fired only when the test advances time. Nothing happens unless the test says so.
 */
import type { EngineResult } from "../../src/core/engine.js";
import { keyTokens } from "../../src/core/namespace.js";
import type { NodeConfigInput } from "../../src/core/node/config.js";
import { PrefixNode } from "../../src/core/node/node.js";
import {
  type Effect,
  type MeshMessage,
  type NodeInput,
  type PeerMessage,
  type ReplyOutcome,
  type RequestRecord,
  type Timer,
  timerKey,
} from "../../src/core/node/types.js";
import { Prng } from "../../src/core/prng.js";
import { PAPER_H100_QWEN05B } from "../../src/engines/sim/profiles.js";
import { SimEngine } from "../../src/engines/sim/sim-engine.js";

/** A mailbox predicate: messages of this type. */
export const isType =
  (type: PeerMessage["type"]) =>
  (m: Mail): boolean =>
    m.msg.type === type;

export interface Mail {
  from: string;
  to: string;
  msg: PeerMessage;
}

interface Member {
  node: PrefixNode;
  engine: SimEngine;
  /** Pending timers by `timerKey`. */
  timers: Map<string, { timer: Timer; at: number }>;
  runs: Map<string, { tokens: Uint32Array; cacheTokens: number; result: EngineResult; at: number }>;
  up: boolean;
}

export class Harness {
  now = 0;
  readonly members = new Map<string, Member>();
  mailbox: Mail[] = [];
  /** Mesh traffic (gossip "scuttlebutt": SWIM and digests), held until `deliverMesh`. */
  meshbox: { from: string; to: string; msg: MeshMessage }[] = [];
  /** `verify-member` effects to answer (the harness's ids hold the cluster's credential). */
  private verifying: { node: string; id: string }[] = [];
  readonly replies: { node: string; reqId: string; outcome: ReplyOutcome; record: RequestRecord }[] = [];
  private readonly rng = new Prng(7);
  /** `abort-run` effects not yet carried out (`endAborted`). */
  aborts: { node: string; jobId: string }[] = [];

  constructor(
    ids: string[],
    overrides: Partial<NodeConfigInput> = {},
    readonly capacity = 10_000,
    /** Per-node settings on top of `overrides`. */
    perNode: (id: string) => Partial<NodeConfigInput> = () => ({}),
  ) {
    for (const id of ids) {
      const node = new PrefixNode(
        {
          pollMs: 100,
          pollJitter: 0,
          forwardTimeoutMs: 1_000,
          ...overrides,
          ...perNode(id),
          id,
          peers: ids.filter((x) => x !== id),
          capacityTokens: capacity,
        },
        { now: () => this.now, random: () => this.rng.next() },
        { checkInvariants: true },
      );
      const engine = new SimEngine({ profile: PAPER_H100_QWEN05B, capacityTokens: capacity });
      const m: Member = { node, engine, timers: new Map(), runs: new Map(), up: true };
      this.members.set(id, m);
      this.apply(id, node.start());
    }
  }

  node(id: string): PrefixNode {
    return this.m(id).node;
  }

  private m(id: string): Member {
    const m = this.members.get(id);
    if (!m) throw new Error(`no node ${id}`);
    return m;
  }

  input(id: string, input: NodeInput): Effect[] {
    const m = this.m(id);
    if (!m.up) return [];
    const effects = m.node.handle(input);
    this.apply(id, effects);
    return effects;
  }

  client(id: string, reqId: string, tokens: Uint32Array, maxTokens = 1): Effect[] {
    return this.input(id, { type: "client-request", reqId, request: { id: reqId, tokens, maxTokens } });
  }

  /** Performs effects the test obtained from the node directly (e.g. `removePeer`). */
  apply(id: string, effects: Effect[]): void {
    const m = this.m(id);
    for (const e of effects) {
      switch (e.type) {
        case "send":
          this.mailbox.push({ from: id, to: e.to, msg: e.msg });
          break;
        case "engine-run": {
          const { result, durationMs } = m.engine.execute(e.request, e.evicted);
          m.runs.set(e.jobId, {
            tokens: keyTokens(e.request),
            cacheTokens: e.cacheTokens,
            result,
            at: this.now + durationMs,
          });
          break;
        }
        case "set-timer":
          m.timers.set(timerKey(e.timer), { timer: e.timer, at: this.now + e.delayMs });
          break;
        case "cancel-timer":
          m.timers.delete(timerKey(e.timer));
          break;
        case "reply":
          this.replies.push({ node: id, reqId: e.reqId, outcome: e.outcome, record: e.record });
          break;
        case "mesh-send":
          this.meshbox.push({ from: id, to: e.to, msg: e.msg });
          break;
        case "verify-member":
          this.verifying.push({ node: id, id: e.id });
          break;
        case "abort-run":
          this.aborts.push({ node: id, jobId: e.jobId });
          break;
      }
    }
  }

  /** Delivers queued mail (matching `filter`) until none is left; mail to a down node is lost. */
  deliver(filter: (m: Mail) => boolean = () => true): number {
    let n = 0;
    for (;;) {
      const i = this.mailbox.findIndex(filter);
      if (i < 0) return n;
      const [mail] = this.mailbox.splice(i, 1) as [Mail];
      n++;
      if (this.members.get(mail.to)?.up)
        this.input(mail.to, { type: "peer-message", from: mail.from, msg: mail.msg });
    }
  }

  /**
   * Delivers mesh mail and answers verifications (yes for the harness's own ids) until none is left,
   * advancing no clock; mail to a down node is lost. Mail matching `hold` stays queued, undelivered.
   */
  deliverMesh(hold: (m: Harness["meshbox"][number]) => boolean = () => false): number {
    let n = 0;
    const held: Harness["meshbox"] = [];
    for (;;) {
      const v = this.verifying.shift();
      if (v !== undefined) {
        this.input(v.node, { type: "member-verified", id: v.id, ok: this.members.has(v.id) });
        continue;
      }
      const mail = this.meshbox.shift();
      if (mail === undefined) {
        this.meshbox.push(...held);
        return n;
      }
      if (hold(mail)) {
        held.push(mail);
        continue;
      }
      if (++n > 100_000) throw new Error("mesh traffic does not settle");
      if (this.members.get(mail.to)?.up)
        this.input(mail.to, { type: "mesh-message", from: mail.from, msg: mail.msg });
    }
  }

  /** Drops queued mail matching `filter`. */
  drop(filter: (m: Mail) => boolean): number {
    const before = this.mailbox.length;
    this.mailbox = this.mailbox.filter((m) => !filter(m));
    return before - this.mailbox.length;
  }

  /** Completes every engine run of `id` (or all nodes), advancing no clock. */
  finishRuns(id?: string): void {
    for (const [mid, m] of this.members) {
      if (id !== undefined && mid !== id) continue;
      for (const [jobId, run] of [...m.runs]) {
        m.runs.delete(jobId);
        m.engine.complete(run.tokens, run.cacheTokens);
        this.input(mid, { type: "engine-done", jobId, result: run.result });
      }
    }
  }

  /**
   * Ends the runs of `id` whose abort was asked, as an abortable engine does: `prefilled` ones keep
   * their prompt cached (`kept`), others nothing. A run that ended first is not there any more.
   */
  endAborted(id: string, prefilled = false): number {
    const m = this.m(id);
    let n = 0;
    for (const a of this.aborts.filter((x) => x.node === id)) {
      const run = m.runs.get(a.jobId);
      if (run === undefined) continue;
      m.runs.delete(a.jobId);
      const kept = prefilled ? run.cacheTokens : 0;
      if (kept > 0) m.engine.complete(run.tokens, kept);
      this.input(id, { type: "engine-aborted", jobId: a.jobId, kept });
      n++;
    }
    this.aborts = this.aborts.filter((x) => x.node !== id);
    return n;
  }

  /** Moves the clock forward by `ms`, firing due timers in time order (mail is not delivered). */
  advance(ms: number): void {
    const end = this.now + ms;
    for (;;) {
      let best: { id: string; key: string; timer: Timer; at: number } | undefined;
      for (const [id, m] of this.members) {
        if (!m.up) continue;
        for (const [key, { timer, at }] of m.timers)
          if (at <= end && (!best || at < best.at)) best = { id, key, timer, at };
      }
      if (!best) break;
      this.now = Math.max(this.now, best.at);
      this.m(best.id).timers.delete(best.key);
      this.input(best.id, { type: "timer", timer: best.timer });
    }
    this.now = end;
  }

  /**
   * Serves `tokens` at `id`, taking `ms`. Call before the first gossip: peers are still unknown to
   * each other, so the request runs locally; `gossip()` afterwards spreads the estimates.
   */
  warm(id: string, reqId: string, tokens: Uint32Array, ms = 0): void {
    this.client(id, reqId, tokens);
    this.advance(ms);
    this.finishRuns(id);
    if (this.repliesFor(reqId)[0]?.record.servedBy !== id) throw new Error(`warm-up of ${id} was not local`);
  }

  /**
   * Advances `ms` in `step`-sized steps, delivering snapshots and mesh traffic so nobody is suspected
   * (mesh mail matching `hold` stays queued).
   */
  advanceLive(ms: number, step = 10, hold?: Parameters<Harness["deliverMesh"]>[0]): void {
    for (let t = 0; t < ms; t += step) {
      this.advance(Math.min(step, ms - t));
      this.deliver(isType("snapshot"));
      this.deliverMesh(hold);
    }
  }

  /** One anti-entropy round for everyone, delivered (snapshots and acks). */
  gossip(rounds = 2): void {
    for (let r = 0; r < rounds; r++) {
      this.advance(100);
      this.deliver(isType("snapshot"));
    }
  }

  crash(id: string): void {
    const m = this.m(id);
    m.up = false;
    m.timers.clear();
    m.runs.clear();
    m.engine.cache.clear();
  }

  /**
   * Back up (after `crash`, like a new process): the final cancels `restart` owes the peers of the
   * forwards it had pending are dropped, since a crashed process no longer knows them and its peers
   * must cope without (the simulator's crash builds a fresh node). A live restart keeps them.
   */
  restart(id: string): void {
    const m = this.m(id);
    const crashed = !m.up;
    m.up = true;
    const out = m.node.restart(this.now);
    this.apply(id, crashed ? out.filter((e) => !(e.type === "send" && e.msg.type === "cancel")) : out);
  }

  repliesFor(reqId: string): Harness["replies"] {
    return this.replies.filter((r) => r.reqId === reqId);
  }
}

/** The peers `effects` forward a request to. */
export function forwardsIn(effects: Effect[]): string[] {
  return effects.flatMap((e) => (e.type === "send" && e.msg.type === "forward" ? [e.to] : []));
}

/** A prompt: `shared` tokens of topic `topic`, then `unique` tokens specific to `q`. */
export function prompt(topic: number, q: number, shared = 64, unique = 16): Uint32Array {
  const t = new Uint32Array(shared + unique);
  for (let i = 0; i < shared; i++) t[i] = 1000 + topic * 997 + i;
  for (let i = 0; i < unique; i++) t[shared + i] = 500_000 + q * 131 + i;
  return t;
}

/**
 * Answer recovery as the daemon runs it (no ETA in acks, acks at once, peer trust, 2 timed-out waits):
 * the settings the recovery, hedge, restart and hang-up tests share (each adds its timeouts).
 */
export const DAEMON_RECOVERY = {
  answerProbes: false,
  ackDeferMs: 0,
  peerTrust: true,
  answerRecovery: true,
  maxTimedOutAttempts: 2,
} as const;

/**
 * Peer trust for the staller cases: at most 3 forwards unanswered, no answer probes, forwards timing
 * out after 5 s and their acks after 250 ms. The trust restart and `/cluster` departed-trust tests share it.
 */
export const STALLER_TRUST = {
  peerTrust: true,
  trustMaxUnanswered: 3,
  answerProbes: false,
  forwardTimeoutMs: 5_000,
  forwardAckTimeoutMs: 250,
} as const;

/**
 * A and B with `overrides`, B having served topic 1 (`warm`) and the gossip settled, so A forwards
 * topic-1 prompts to B: the start of the forward, cancel, hedge and hang-up cases.
 */
export function warmPair(
  overrides: Partial<NodeConfigInput> = {},
  perNode?: (id: string) => Partial<NodeConfigInput>,
): Harness {
  const h = new Harness(["A", "B"], overrides, 10_000, perNode);
  h.warm("B", "warm", prompt(1, 0));
  h.gossip(3);
  return h;
}

/**
 * `ids` as the daemon runs them under gossip "scuttlebutt" (answer recovery, an `ackMs` ack timeout),
 * B having served topic 1 and the gossip settled for 3 s.
 */
export function daemonGossip(
  ids: readonly string[],
  ackMs: number,
  overrides: Partial<NodeConfigInput> = {},
): Harness {
  const h = new Harness([...ids], {
    gossip: "scuttlebutt",
    ...DAEMON_RECOVERY,
    forwardAckTimeoutMs: ackMs,
    forwardTimeoutMs: 30_000,
    ...overrides,
  });
  h.warm("B", "warm1", prompt(1, 0));
  h.advanceLive(3_000);
  return h;
}

/** Advances `h` 10 ms at a time, dropping the mail `lost` matches, until `node` has fallen back. */
export function untilFallback(h: Harness, node: string, lost: (m: Mail) => boolean, limitMs: number): void {
  for (let t = 0; h.node(node).stats().fallbacks === 0; t += 10) {
    if (t > limitMs) throw new Error(`no fallback within ${limitMs / 1000} s`);
    h.drop(lost);
    h.advanceLive(10);
  }
}

/**
 * A's client request `reqId` forwarded to B, acked, run there, and B's answer lost on the way back:
 * the start of every answer-recovery case.
 */
export function answerLost(h: Harness, reqId: string, tokens: Uint32Array): void {
  h.client("A", reqId, tokens);
  h.deliver(isType("forward"));
  h.deliver(isType("forward-ack"));
  h.finishRuns("B");
  if (h.drop(isType("result")) !== 1) throw new Error(`B's answer to ${reqId} was not on its way`);
}
