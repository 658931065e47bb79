/**
 * PrefixNode: one peer of the mesh as a pure state machine — the paper's Algorithm 1 plus §3. See
 * types.ts for the contract with the runtime (simulator or daemon): inputs in, effects out.
 *
 * This file orchestrates. Each role owns one subsystem's state and never calls another: origin.ts
 * (our clients' requests), serving.ts (peers' forwards), anti-entropy.ts (snapshots both ways),
 * executor.ts (queue, engine runs, the exact tree), membership.ts (liveness; mesh.ts picks each
 * per gossip mode). Every decision that needs two of them is made here, from the values they return;
 * the read-only views over them are views.ts's NodeViews, its routing reads node-routing.ts's, and its
 * life outside its inputs (start, restart into a new epoch, goodbye) node-lifecycle.ts's NodeLifecycle.
 */
import type { EngineRequest } from "../engine.js";
import { keyTokens } from "../namespace.js";
import { type NodeConfig, type NodeConfigInput, resolveNodeConfig } from "./config.js";
import { stampCosts } from "./engine-costs.js";
import { Executor } from "./executor.js";
import * as mesh from "./mesh.js";
import { PeerModels, servesModel } from "./models.js";
import { NodeLifecycle } from "./node-lifecycle.js";
import { OFFLOAD_SCAN, OffloadRound } from "./offload.js";
import { Origin } from "./origin.js";
import { reportedDepth, stampQueueDepth } from "./peer-load.js";
import { RecentPrefixes } from "./recent-prefixes.js";
import { Serving } from "./serving.js";
import { checkJob } from "./spot-check.js";
import type {
  Effect,
  NodeDeps,
  NodeId,
  NodeInput,
  NodeOptions,
  PeerMessage,
  PeerMessageOf,
  Timer,
} from "./types.js";
import { roundPeers } from "./views.js";

export { DUPLICATE_HANDLED, FORWARD_CANCELLED } from "./serving.js";
export type { NodeOptions } from "./types.js";

export class PrefixNode extends NodeLifecycle {
  readonly config: NodeConfig;
  protected members!: mesh.Members;
  protected readonly origin: Origin;
  protected readonly serving: Serving;
  protected readonly antiEntropy: mesh.Gossip;
  protected readonly executor: Executor;
  protected unknownSender = 0;
  readonly peerModels = new PeerModels();
  protected readonly recent: RecentPrefixes | undefined;

  constructor(
    config: NodeConfigInput,
    protected readonly deps: NodeDeps,
    opts: NodeOptions = {},
  ) {
    super();
    this.config = resolveNodeConfig(config);
    const paranoid = opts.checkInvariants === true;
    this.origin = new Origin(this.config, deps, paranoid);
    this.serving = new Serving(this.config);
    this.antiEntropy = mesh.newAntiEntropy(this.config, deps);
    this.executor = new Executor(this.config, this.config.id, paranoid);
    const recentMs = this.config.recentPrefixMs;
    this.recent = recentMs > 0 ? new RecentPrefixes(recentMs) : undefined;
    this.reset(Math.floor(opts.epoch ?? deps.now()));
  }

  /**
   * Removes a peer at run time (gone from DNS, or its address answers with another id): its estimate
   * goes, and forwards waiting on it fail over at once (its late answers count as a non-member's).
   */
  removePeer(id: NodeId): Effect[] {
    const out: Effect[] = [];
    if (!this.members.remove(id)) return out;
    this.antiEntropy.remove(id);
    this.origin.removePeer(id, this.deps.now());
    this.peerModels.delete(id);
    this.failPendingTo(id, this.deps.now(), out);
    return this.origin.finishStep(out);
  }

  handle(input: NodeInput): Effect[] {
    const out: Effect[] = [];
    const now = this.deps.now();
    switch (input.type) {
      case "client-request":
        this.onClientRequest(input.reqId, input.request, now, out);
        break;
      case "client-gone": // client-gone.ts
        this.origin.answering.clientGone(input, out, (id) => this.executor.dropClient(id, out));
        break;
      case "peer-message":
        this.onPeerMessage(input.from, input.msg, now, out);
        break;
      case "engine-done": {
        const done = this.executor.done(input.jobId, input.result, now);
        if (!done) break; // from before a restart
        const { job, result, timing } = done;
        if (job.kind === "forward") this.serving.answered(job, result, timing, now, out);
        else if (job.kind === "check") this.origin.checked(job.reqId, result.text);
        else this.origin.answering.completeLocal(job, result, timing, now, out);
        this.executor.pump(now, out);
        break;
      }
      case "engine-failed": {
        const job = this.executor.failed(input.jobId);
        if (!job) break;
        if (job.kind === "forward") this.serving.failed(job, input, now, out);
        else if (job.kind === "check") this.origin.spot.drop(job.reqId);
        else this.origin.answering.failLocal(job, input, now, out);
        this.executor.pump(now, out);
        break;
      }
      case "engine-aborted": {
        const job = this.executor.aborted(input.jobId, input.kept ?? 0, input.sequences);
        // Only our clients' runs and peers' forwards are ever aborted (never a spot check).
        if (job?.kind === "forward") this.serving.aborted(job, now, out);
        else if (job?.kind === "client") this.origin.answering.abortedLocal(job);
        this.executor.pump(now, out);
        break;
      }
      case "timer":
        this.onTimer(input.timer, now, out);
        break;
      case "forward-output":
        this.origin.onForwardOutput(input.reqId, input.from, now);
        break;
      case "send-failed":
        this.onSendFailed(input.to, input.msg, now, out);
        break;
      case "mesh-message":
      case "member-verified":
      case "mesh-seed":
        this.onMesh(input, now, out);
        break;
      case "engine-cache-changed":
        this.executor.cacheChanged(input.sequences);
    }
    this.origin.finishStep(out); // final cancels: abort-runs.ts
    this.origin.gone.check(out);
    if (this.config.freshPeerLoad) stampQueueDepth(out, this.executor.reportedDepth(now));
    const costs = this.config.advertiseCosts ? this.executor.engineCosts() : undefined;
    if (costs) stampCosts(out, costs, this.config.id);
    return out;
  }

  private onClientRequest(reqId: string, request: EngineRequest, now: number, out: Effect[]): void {
    const refused = this.origin.admission.admit(reqId, request, now);
    if (refused) return void out.push(refused);
    const self = this.executor.selfView(this.config.id, request, now);
    mesh.seek(this.antiEntropy, request, self.match, this.executor, now, out);
    const candidates = this.origin.needsPeers ? this.candidates(request, now, self) : undefined;
    const costs = this.learnedCosts();
    this.origin.open(reqId, request, now, self.match, candidates, costs, this.executor.eviction());
    this.advance(reqId, now, out);
  }

  /**
   * Next step of a pending request: forward to the next routable planned peer, else run locally.
   * `recent`: false after offload's pick (`soonerPeer`), which is made without recentPrefixMs.
   */
  private advance(reqId: string, now: number, out: Effect[], recent = true): void {
    // The first choice was routable a moment ago; later ones are re-checked (state may have moved).
    for (let to = this.origin.nextPlanned(reqId); to !== undefined; to = this.origin.nextPlanned(reqId)) {
      if (!this.routableFor(reqId, to, now, recent) || !this.origin.trust.mayHold(to)) continue;
      this.origin.forward(reqId, to, now, out);
      this.recent?.record(to, keyTokens(this.origin.requestOf(reqId)), now);
      return;
    }
    const run = this.origin.runHere(reqId);
    if (!servesModel(this.config.models, run.request.model))
      return void this.origin.answering.refuseUnserved(run, now, out);
    const waitMs = this.executor.admissionWaitMs(now);
    const admission = this.origin.admission;
    const tooLong = admission.waitsTooLong(reqId, waitMs, now, this.executor.etaMs(run.request, now, 0));
    if (tooLong === undefined && !this.executor.full()) {
      this.executor.enqueue({ kind: "client", from: undefined, ...run }, now, out);
      this.recent?.record(this.config.id, keyTokens(run.request), now);
      return void this.origin.hedge(reqId, now, out, () => this.executor.runsClient(reqId));
    }
    // About to refuse for our wait: first a peer expected to start it in time, if any.
    const w = { reqId, request: run.request, startsInMs: waitMs ?? 0 };
    const to = tooLong === "spill" ? this.soonerPeer(w, now, admission.waitBoundMs(reqId)) : undefined;
    if (to !== undefined) {
      this.origin.reroute(reqId, to.to, to.expectMs);
      return void this.advance(reqId, now, out, false);
    }
    this.origin.refuseOverloaded(run, now, out, tooLong === undefined ? undefined : waitMs);
  }

  /** The current attempt failed: the origin gives it up, then the request moves on. */
  private failOver(reqId: string, now: number, out: Effect[], cancelTimer: boolean, cancel: boolean): void {
    this.origin.fallback(reqId, out, cancelTimer, cancel);
    this.advance(reqId, now, out);
  }

  /**
   * The forwards `to` lost fail over: it is gone, or restarted at `epoch` in gossip (forward-attempts.ts
   * `lostTo`). A full-mesh restart (`resend`; acks name no epoch) sends each to it again instead.
   */
  private failPendingTo(to: NodeId, now: number, out: Effect[], epoch?: number, resend = false): void {
    // Hedges first: a request failing over may queue here at once, and must not re-ask `to`.
    this.origin.endHedgesTo(to, out, epoch);
    this.origin.limits.forget(to); // it may come back with other limits
    this.recent?.forget(to); // restarted or gone: its queue is lost
    if (resend) this.origin.resendTo(to, now, out);
    else for (const reqId of this.origin.lostTo(to, epoch)) this.failOver(reqId, now, out, true, false);
  }

  /**
   * `to` said goodbye: it drains what it took. Its forwards fail over as a departed peer's do, but
   * each stays owed its final cancel (forward-attempts.ts `departed`), so the run nobody takes is aborted; at
   * once when `to` is no member any more (gossip): its answers are dropped unread from now on.
   */
  private peerLeft(to: NodeId, now: number, out: Effect[]): void {
    this.origin.endHedgesTo(to, out, undefined, (reqId) => this.executor.runsClient(reqId));
    for (const reqId of this.origin.departed(to, out, this.members.has(to))) this.advance(reqId, now, out);
  }

  private onPeerMessage(from: NodeId, msg: PeerMessage, now: number, out: Effect[]): void {
    if (!this.members.has(from)) {
      this.unknownSender++;
      return;
    }
    // Only anti-entropy says a leaver is back (restarted): its answers and acks for what it drains do not.
    this.members.heard(from, now, msg.type === "snapshot");
    if (this.config.freshPeerLoad) this.antiEntropy.queueReported(from, reportedDepth(msg), now);
    switch (msg.type) {
      case "snapshot": {
        const rtt = this.antiEntropy.onEcho(from, msg.at, msg.echo, now);
        if (rtt !== undefined) this.origin.targets.sampleRtt(from, rtt);
        const rttMs = this.origin.targets.rttMs(from);
        const r = this.antiEntropy.onSnapshot(from, msg.snapshot, msg.holds, msg.blocks, now, rttMs);
        this.antiEntropy.scheduleSteps(out);
        if (r.reported) this.origin.targets.loadReported(from);
        if (r.restarted) this.failPendingTo(from, now, out, undefined, true);
        else if (r.renewed) this.origin.resendTo(from, now, out); // which process took them is unknown
        if (r.restarted || r.renewed) this.origin.restartedPeer(from);
        break;
      }
      case "forward":
        this.onForward(from, msg, now, out);
        break;
      case "forward-ack":
        if (this.origin.onForwardAck(from, msg, out)) this.failOver(msg.reqId, now, out, true, false);
        break;
      case "cancel": {
        const key = this.serving.cancelKey(from, msg.reqId, msg.attempt);
        if (key === undefined) break;
        // Still queued: dropped, and said so. Started, or not arrived yet: the serving role notes it.
        if (this.executor.cancelQueued(key)) this.serving.cancelled(from, msg.reqId, msg.attempt, key, out);
        else this.serving.cancelAhead(key);
        if (msg.final === true) this.executor.abortForward(key, out); // abort-runs.ts
        break;
      }
      case "result": {
        if (this.origin.answering.refuseQuarantined(from, msg, out)) {
          this.advance(msg.reqId, now, out);
          break;
        }
        const x = this.executor;
        const abort = (id: string) => x.abortClient(id, "hedged", out);
        const served = this.origin.answering.onResult(from, msg, now, out, (id) => x.takeQueued(id), abort);
        if (served) this.antiEntropy.believeServed(from, served, now);
        break;
      }
      case "error":
        if (this.origin.onError(from, msg, out)) this.advance(msg.reqId, now, out);
        break;
      case "goodbye":
        this.members.departed(from);
        this.antiEntropy.forget(from);
        this.peerLeft(from, now, out);
        break;
    }
  }

  /** A forward: refused, or acked at once and queued, never forwarded again; a copy never runs twice. */
  private onForward(from: NodeId, msg: PeerMessageOf<"forward">, now: number, out: Effect[]): void {
    const verdict = this.serving.admit(from, msg, this.executor.loadNow(now), out);
    if (verdict === undefined) return;
    const { reqId, attempt, deadlineMs } = msg;
    const job = verdict.kind === "duplicate" ? this.executor.jobFor(verdict.key, now) : undefined;
    if (verdict.kind === "duplicate" && job === undefined) {
      this.serving.handled(from, reqId, attempt, verdict.key, now, out);
      return;
    }
    const request = job?.request ?? msg.request;
    const eta = this.serving.wantsEta ? this.executor.etaMs(request, now, job?.ranMs) : undefined;
    this.serving.ack(from, reqId, attempt, verdict.key, eta, now, out);
    if (verdict.kind !== "accept") return;
    const fwd = { kind: "forward", reqId, from, attempt, request, key: verdict.key, deadlineMs } as const;
    this.executor.enqueue(fwd, now, out);
    this.recent?.record(this.config.id, keyTokens(request), now);
  }

  private onSendFailed(to: NodeId, msg: PeerMessage | undefined, now: number, out: Effect[]): void {
    if (!this.members.has(to)) return;
    this.members.sendFailed(to);
    if (msg?.type === "forward" && this.origin.isCurrent(msg.reqId, to, msg.attempt))
      this.failOver(msg.reqId, now, out, true, true);
  }

  private onTimer(timer: Timer, now: number, out: Effect[]): void {
    switch (timer.kind) {
      case "poll": {
        const peers = roundPeers(this.members, this.origin.targets, now);
        const x = this.executor;
        if (!this.leaving)
          this.antiEntropy.round(now, x.tree, x.reportedDepth(now), x.pushBackMs(), peers, out);
        // Forwards to peers that went silent need not wait for their full timeout.
        const silent = (p: NodeId) => this.members.has(p) && this.members.liveness(p, now) !== "live";
        for (const reqId of this.origin.waitingOn(silent)) this.failOver(reqId, now, out, true, true);
        if (this.config.offload) this.offloadWaiting(now, out);
        // Spot checks (spot-check.ts) run only when nothing waits here.
        const c = this.executor.queueDepth() === 0 ? this.origin.spot.take() : undefined;
        if (c) this.executor.enqueue(checkJob(c), now, out);
        out.push({ type: "set-timer", timer: { kind: "poll" }, delayMs: this.pollDelay() });
        break;
      }
      case "forward":
      case "ack":
        if (this.origin.onTimer(timer, now, out)) this.advance(timer.reqId, now, out);
        break;
      case "hedge":
        this.origin.onHedgeTimer(timer, now, out, () => this.executor.runsClient(timer.reqId));
        break;
      case "acks":
        this.serving.onAcksTimer(now, out);
        break;
      case "estimates":
        this.antiEntropy.onStepTimer(now, out);
        break;
      case "swim":
      case "gossip-round":
        this.onMesh({ type: "timer", timer }, now, out);
    }
  }

  /** Offload (offload.ts): waiting client requests move to a peer finishing sooner, within their bound. */
  private offloadWaiting(now: number, out: Effect[], round = new OffloadRound(), k = this.learnedCosts()) {
    for (const w of this.executor.waitingClients(now, OFFLOAD_SCAN)) {
      const to = this.soonerPeer(w, now, this.origin.admission.waitLeftMs(w.reqId, now), round, k);
      if (to === undefined || !this.executor.takeQueued(w.reqId)) continue;
      this.origin.reroute(w.reqId, to.to, to.expectMs);
      this.advance(w.reqId, now, out, false);
    }
  }

  /** gossip "scuttlebutt" (mesh.ts): members came, went, or came back in a new epoch (a restart). */
  protected override onMesh(input: NodeInput | "start", now: number, out: Effect[]): void {
    const ev = mesh.step(input, this.members, this.antiEntropy, this.origin, this.executor, now, out);
    for (const id of ev.down)
      if (ev.left.includes(id)) this.peerLeft(id, now, out);
      else this.failPendingTo(id, now, out);
    for (const r of ev.restarted ?? []) this.failPendingTo(r.id, now, out, r.epoch);
    for (const r of ev.rtt) this.origin.targets.sampleRtt(r.id, r.ms, true);
  }
}
