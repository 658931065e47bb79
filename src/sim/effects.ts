/**
 * A node's effects performed in virtual time: sends put on the simulated network (what a stalling or
 * lying node does to its answers included), engine runs started on its simulated engine and their
 * ends scheduled, aborts, timers, mesh datagrams and member checks (tried as the daemon does:
 * hello-tries.ts). Replies go back to the run loop (`reply`), which owns the clients.
 */
import { keyTokens } from "../core/namespace.js";
import { type Effect, type NodeInput, type PeerMessage, timerKey } from "../core/node/types.js";
import type { EngineFaultModel } from "./faults/engine.js";
import type { NodeFaultModel } from "./faults/node.js";
import { helloTry } from "./hello-tries.js";
import type { SimNetwork } from "./network.js";
import type { QueueWaits } from "./queue-waits.js";
import { type Agenda, requestIndex, type SimNodeState } from "./run-state.js";
import type { Traffic } from "./traffic.js";

/** What performing effects reads and tells outside this file. */
export interface EffectsContext {
  nodes: readonly SimNodeState[];
  idxOf: ReadonlyMap<string, number>;
  queue: Agenda;
  net: SimNetwork;
  traffic: Traffic;
  /** Where the queue waits a record's `queueMs` misses are measured. */
  queueWaits: QueueWaits;
  nodeFaults: NodeFaultModel;
  engineFaults: EngineFaultModel;
  /** Δcomm (ms): a member check's try takes a round trip of it. */
  commMs: number;
  /** Requests in the workload. */
  requests: number;
  now(): number;
  /** Node `s` made a reply (a client's answer or failure). */
  reply(s: SimNodeState, e: Extract<Effect, { type: "reply" }>): void;
  /** An engine run started: after the last answer, settling starts again from here. */
  runStarted(): void;
}

export class SimEffects {
  private timerSeq = 0;
  private readonly delayBuf = [0, 0];
  /**
   * Checks under way, `node id` to the checker's life (`inc`): like the daemon (mesh-verify.ts), one per
   * id a node checks. Keyed without the life so a crash's unanswered checks are overwritten, not kept.
   */
  private readonly checking = new Map<string, number>();
  /** Engine runs per workload request: more than one means the same work was computed twice. */
  readonly runsPerRequest: Uint32Array;

  constructor(private readonly ctx: EffectsContext) {
    this.runsPerRequest = new Uint32Array(ctx.requests);
  }

  /** Performs node `s`'s `effects`, in order. */
  apply(s: SimNodeState, effects: Effect[]): void {
    const { ctx } = this;
    const now = ctx.now();
    for (const e of effects) {
      switch (e.type) {
        case "send": {
          ctx.traffic.peer(e.msg, now);
          if (e.msg.type === "forward") s.summary.forwarded++;
          const to = ctx.idxOf.get(e.to);
          if (to === undefined) break;
          this.measure(s, to, e.msg, now);
          // A stalling peer's answers never leave it.
          const answer = e.msg.type === "result" || e.msg.type === "error";
          if (answer && ctx.nodeFaults.stalling(s.idx, now)) break;
          if (e.msg.type === "result" && ctx.nodeFaults.lying(s.idx, now)) {
            // A lying peer: the answer's text is not the model's.
            this.transmit(s.idx, to, {
              ...e.msg,
              result: { ...e.msg.result, text: `lie ${e.msg.result.text}` },
            });
            break;
          }
          this.transmit(s.idx, to, e.msg);
          break;
        }
        case "engine-run": {
          // A run starting after the last answer (work its origin gave up on) evicts from a tree at
          // once: settling starts again from here, as it does when such a run ends.
          ctx.runStarted();
          for (const r of e.evicted) s.summary.evictedTokens += r.path.length - r.keep;
          const { result, durationMs: modelledMs } = s.engine.execute(e.request, e.evicted);
          // A slowed engine takes longer and says so: the node learns its costs from these times.
          const slow = ctx.engineFaults.slowdown(s.idx, now);
          const durationMs = modelledMs * slow;
          if (slow !== 1) {
            result.prefillMs *= slow;
            result.decodeMs *= slow;
          }
          if (s.outstanding.has(e.request.id)) ctx.queueWaits.ranHere(e.request.id, now);
          else ctx.queueWaits.left(e.request.id, s.idx, now);
          const ri = requestIndex(e.request.id);
          if (ri >= 0 && ri < ctx.requests) this.runsPerRequest[ri] = (this.runsPerRequest[ri] as number) + 1;
          const tokens = keyTokens(e.request);
          s.runs.set(e.jobId, { tokens, cacheTokens: e.cacheTokens, result, startedAt: now });
          const fail = ctx.engineFaults.fails();
          ctx.queue.push({
            at: now + durationMs,
            k: "engine",
            node: s.idx,
            inc: s.inc,
            jobId: e.jobId,
            fail,
          });
          break;
        }
        case "abort-run": {
          // The run ends now (its modelled end is ignored when it comes).
          const run = s.runs.get(e.jobId);
          if (run === undefined || run.aborted) break;
          run.aborted = true;
          ctx.queue.push({
            at: now,
            k: "engine",
            node: s.idx,
            inc: s.inc,
            jobId: e.jobId,
            fail: false,
            abort: true,
          });
          break;
        }
        case "set-timer": {
          const token = ++this.timerSeq;
          const key = timerKey(e.timer);
          s.timers.set(key, token);
          ctx.queue.push({
            at: now + e.delayMs,
            k: "timer",
            node: s.idx,
            inc: s.inc,
            timer: e.timer,
            key,
            token,
          });
          break;
        }
        case "cancel-timer":
          s.timers.delete(timerKey(e.timer));
          if (e.timer.kind === "forward") ctx.queueWaits.ended(e.timer.reqId, e.timer.attempt, now);
          break;
        case "reply":
          ctx.reply(s, e);
          break;
        case "mesh-send": {
          ctx.traffic.mesh(e.msg, now);
          const to = ctx.idxOf.get(e.to);
          const dest = to === undefined ? undefined : ctx.nodes[to];
          if (to === undefined || !dest?.node) break;
          const copies = ctx.net.delays(now, s.idx, to, this.delayBuf);
          for (let c = 0; c < copies; c++)
            ctx.queue.push({
              at: now + (this.delayBuf[c] as number),
              k: "mesh",
              to,
              inc: dest.inc,
              from: s.idx,
              msg: e.msg,
            });
          break;
        }
        case "verify-member": {
          const key = `${s.idx} ${e.id}`;
          if (this.checking.get(key) === s.inc) break;
          this.checking.set(key, s.inc);
          this.tryHello(s, e.id, 0);
          break;
        }
      }
    }
  }

  /** Checks under way (for tests): at most one per node and id it checks. */
  get checksUnderWay(): number {
    return this.checking.size;
  }

  /** The answer to `s`'s check of `id`, as fed to it: the check is over, another may start. */
  answer(s: SimNodeState, id: string, ok: boolean): NodeInput {
    const key = `${s.idx} ${id}`;
    if (this.checking.get(key) === s.inc) this.checking.delete(key);
    return { type: "member-verified", id, ok };
  }

  /**
   * Try `attempt` of `s`'s check of `id`: a host that is down or cut off by a partition answers no try,
   * a frozen one answers once it resumes (hello-tries.ts). The simulation's own ids hold the credential,
   * but for those run without one, whose checks of others fail too (the daemon's hello requests are
   * signed).
   */
  tryHello(s: SimNodeState, id: string, attempt: number): void {
    const { ctx } = this;
    const now = ctx.now();
    const rttMs = 2 * ctx.commMs;
    const check = { node: s.idx, inc: s.inc, id };
    const of = ctx.idxOf.get(id);
    if (of === undefined || !ctx.nodeFaults.authenticated(s.idx)) {
      ctx.queue.push({ at: now + rttMs, k: "verified", ...check, ok: false });
      return;
    }
    const answersAt = ctx.nodes[of]?.node ? Math.max(now, ctx.nodeFaults.pausedUntil(of, now)) : undefined;
    const r = helloTry(now, attempt, answersAt, rttMs, ctx.net.partitioned(now, s.idx, of));
    if (r.k === "retry") ctx.queue.push({ at: r.at, k: "verify", ...check, attempt: attempt + 1 });
    else {
      const ok = r.k === "answer" && ctx.nodeFaults.authenticated(of);
      ctx.queue.push({ at: r.at, k: "verified", ...check, ok });
    }
  }

  /** What a send tells the queue waits: an origin's forward, or a peer's answer to one. */
  private measure(s: SimNodeState, to: number, msg: PeerMessage, now: number): void {
    const q = this.ctx.queueWaits;
    if (msg.type === "forward" && s.outstanding.has(msg.reqId)) q.sent(msg.reqId, to, msg.attempt, now);
    else if (msg.type === "result" || msg.type === "error") q.left(msg.reqId, s.idx, now, msg.attempt);
  }

  /** Puts `msg` from node `from` on the network to node `to` (lost if its host is down). */
  transmit(from: number, to: number, msg: PeerMessage): void {
    const dest = this.ctx.nodes[to] as SimNodeState;
    if (!dest.node) return; // host down: silently lost
    const now = this.ctx.now();
    const copies = this.ctx.net.delays(now, from, to, this.delayBuf);
    for (let c = 0; c < copies; c++) {
      this.ctx.queue.push({
        at: now + (this.delayBuf[c] as number),
        k: "deliver",
        to,
        inc: dest.inc,
        from,
        msg,
        sentAt: now,
      });
    }
  }
}
