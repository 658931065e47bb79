/**
 * The peer transport's two directions as the runtime sees them: what arrives from peers (the peer
 * server's handlers: forwards, messages, hello) becomes node inputs, and each message the node sends
 * takes its channel: the sender, or the answer stream of a forward this node serves
 * (transport-rules.ts: [Answer on the stream], [Transport acks]).
 */
import type { Engine } from "../../core/engine.js";
import { FORWARD_CANCELLED } from "../../core/node/serving.js";
import type { ForwardLimits, NodeInput, PeerMessage, PeerMessageOf } from "../../core/node/types.js";
import type { PeerServerHandlers } from "../../net/peer-handlers.js";
import type { NodeMetrics } from "../metrics.js";
import type { Admin } from "./admin.js";
import { AuthRefusalLog } from "./auth-refusal-log.js";
import { EarlyCancels } from "./early-cancels.js";
import { engineRunError, runFaultOf } from "./engine-step-errors.js";
import { DEFAULT_MAX_PEER_TOKENIZING, type EngineSteps } from "./engine-steps.js";
import type { RuntimeLogger } from "./logger.js";
import type { PeerSender } from "./peer-sender.js";
import { PeerServedCounts } from "./peer-served.js";
import { type ServedForwards, streamKey } from "./served-forwards.js";
import { retryableError } from "./transport-rules.js";

export interface PeerTrafficOptions {
  engine: Engine;
  /** Bounds a re-tokenized forward's engine steps by `--tokenize-timeout-ms`, as a client's are. */
  steps: Pick<EngineSteps, "bounded" | "peerOpen">;
  /** `--max-peer-tokenizing`: forwards' engine steps open at once (default DEFAULT_MAX_PEER_TOKENIZING). */
  maxPeerTokenizing?: number | undefined;
  metrics: NodeMetrics;
  logger: RuntimeLogger;
  admin: Admin;
  served: ServedForwards;
  sender: PeerSender;
  now: () => number;
  /** True once shutdown has begun: new forwards are handed back. */
  isStopping(): boolean;
  /** Hands an input to the node (and performs its effects). */
  feed(input: NodeInput): void;
  /** Requests this node has served in its current epoch (rides on its snapshots: peer-served.ts). */
  ownServed(): number;
  /** Largest maxTokens a forward may ask (`--max-tokens-ceiling`, as for our own clients); none: no bound. */
  maxTokensCeiling?: number;
}

export class PeerTraffic {
  private readonly modelId: string;
  /** Each peer's served requests, as its snapshots say (for `/cluster`). */
  readonly servedCounts = new PeerServedCounts();
  /** Told each direct snapshot's epoch: the full mesh re-reads a static peer's hello on a restart. */
  onPeerEpoch: ((from: string, epoch: number) => void) | undefined;
  /** Forwards being tokenized again, by `streamKey`: their origin's cancel ends the step. */
  private readonly tokenizing = new Map<string, AbortController>();
  /** Cancels that came before their forward (bounded): such a forward is answered, not tokenized. */
  private readonly early: EarlyCancels;

  /** Said once a minute per reason: the port's refusals may come many a second. */
  private readonly authRefusals: AuthRefusalLog;

  constructor(private readonly o: PeerTrafficOptions) {
    this.authRefusals = new AuthRefusalLog(o.logger, o.now);
    this.modelId = o.engine.info.model;
    this.early = new EarlyCancels({ now: o.now });
  }

  handlers(): PeerServerHandlers {
    return {
      hello: () => this.o.admin.hello(),
      isKnownPeer: (id) => this.o.admin.isKnownPeer(id),
      onForward: (from, msg, stream) => {
        if (this.o.isStopping()) {
          this.o.metrics.forwardsRefused.inc({ reason: "stopping" });
          stream.finish(retryableError(msg, "shutting down"));
          return;
        }
        const first = this.o.served.add(from, msg, stream, this.o.now());
        const foreign = msg.request.tokenizer;
        if (foreign === undefined || foreign === this.modelId) this.admit(from, msg);
        else if (first === undefined) this.retokenize(from, msg);
        // A copy sent again: its own step failing would answer the first copy's streams too, though
        // that one may run. Once the first is tokenized, the node sees this one (a duplicate it acks
        // again); until then the first's admission acks on this newest stream.
        else if (first.tokenizer === undefined) this.admit(from, { ...msg, request: first });
      },
      onMessage: (from, msg, wireBytes) => {
        if (msg.type === "snapshot") {
          this.o.metrics.gossipBytes.inc({ peer: from, direction: "in" }, wireBytes);
          if (msg.snapshot.header.sender === from) {
            this.servedCounts.report(from, msg.snapshot.header.epoch, msg.served);
            this.onPeerEpoch?.(from, msg.snapshot.header.epoch);
          }
        }
        if (msg.type === "cancel") this.cancelTokenizing(from, msg);
        // A cancel the node acts on makes it answer the forward's stream itself (FORWARD_CANCELLED).
        // Told one that ended a step too: it then drops a copy of that forward on arrival.
        this.o.feed({ type: "peer-message", from, msg });
      },
      onAuthRejected: (reason) => {
        this.o.metrics.authRejected.inc({ reason });
        this.authRefusals.refused(reason);
      },
    };
  }

  /**
   * A forward whose tokens another model's tokenizer made (its origin does not serve the model, mixed
   * meshes): they only routed it, so the prompt is tokenized again here before the node sees it; a
   * chat's is first rendered again from its messages with this model's chat template.
   */
  private retokenize(from: string, msg: PeerMessageOf<"forward">): void {
    const { messages, prompt } = msg.request;
    const { engine, steps } = this.o;
    if (this.early.has(from, msg.reqId, msg.attempt)) {
      // Its cancel overtook it: answered as one cancelled during its step is, holding no place.
      if (this.o.served.answer(from, retryableError(msg, FORWARD_CANCELLED)))
        this.o.metrics.forwardsRefused.inc({ reason: "cancelled" });
      return;
    }
    const max = this.o.maxPeerTokenizing ?? DEFAULT_MAX_PEER_TOKENIZING;
    if (steps.peerOpen >= max) {
      // Busy, honestly (fault `load`: a back-off, no mark): the origin falls back at once.
      this.o.metrics.forwardsRefused.inc({ reason: "tokenize-busy" });
      const why = `overloaded: ${max} forwards already being tokenized here (--max-peer-tokenizing)`;
      this.o.served.answer(from, retryableError(msg, why, undefined, "load"));
      return;
    }
    const key = streamKey(from, msg.reqId, msg.attempt);
    const cancel = new AbortController();
    const cancelled = cancel.signal;
    this.tokenizing.set(key, cancel);
    const settled = () => {
      if (this.tokenizing.get(key) === cancel) this.tokenizing.delete(key);
    };
    // Each step is started at once (a prompt's tokenize too), so `peerOpen` counts this forward now.
    const tokenize = (p: string | undefined) => {
      if (p === undefined) throw new Error("no prompt text");
      msg.request.prompt = p;
      return steps.bounded((signal) => engine.tokenize(p, signal), "tokenize", true, cancelled);
    };
    const tokens = messages
      ? steps
          .bounded((signal) => engine.applyChatTemplate(messages, signal), "chat template", true, cancelled)
          .then(tokenize)
      : (async () => tokenize(prompt))();
    tokens.then(
      (t) => {
        settled();
        // Cancelled, and answered so (`cancelTokenizing`): nobody waits for it.
        if (cancelled.aborted) return;
        msg.request.tokens = t;
        msg.request.tokenizer = undefined;
        msg.request.messages = undefined;
        this.admit(from, msg);
      },
      (err: Error) => {
        settled();
        // Ended by its origin's cancel, already answered (`cancelTokenizing`): no refusal of its prompt.
        if (cancelled.aborted) return;
        // Whose fault, as a failed run says it: a prompt our engine refuses, or its load, is no mark
        // against us at the origin (else any client's bad prompt could get us demoted). The text too:
        // bounded, and the engine URL cut to its path (its host and credentials are the operator's).
        // A step past --tokenize-timeout-ms is `engine`: a hang is no honest busy (that is a 429/503,
        // `load`), so it counts against us and the origin stops waiting on us, as for an engine down.
        // Answered through `served`, which frees the forward's open stream now, not at its TTL. One
        // `served` no longer holds was answered already (the drain's end, then aborting this step: no
        // refusal of its prompt), so it is not counted.
        const why = `cannot tokenize a forward: ${engineRunError(err)}`;
        const reply = retryableError(msg, why, undefined, runFaultOf(err));
        if (this.o.served.answer(from, reply)) this.o.metrics.forwardsRefused.inc({ reason: "tokenize" });
      },
    );
  }

  /**
   * The origin cancelled a forward still being tokenized again: its step ends now (the engine's call
   * aborted; `peerOpen` still counts it until it ends) and its stream is answered as the node answers
   * a cancelled forward, so it neither holds a `--max-peer-tokenizing` place until the bound nor
   * reaches the node for nobody. One for a forward not here yet is kept (`early`) for its arrival;
   * one whose forward's stream is open went to the node with it, which handles the cancel.
   */
  private cancelTokenizing(from: string, msg: PeerMessageOf<"cancel">): void {
    const key = streamKey(from, msg.reqId, msg.attempt);
    const step = this.tokenizing.get(key);
    if (step === undefined) {
      if (!this.o.served.isOpen(from, msg.reqId, msg.attempt)) this.early.note(from, msg.reqId, msg.attempt);
      return;
    }
    this.tokenizing.delete(key);
    step.abort();
    if (this.o.served.answer(from, retryableError(msg, FORWARD_CANCELLED)))
      this.o.metrics.forwardsRefused.inc({ reason: "cancelled" });
  }

  /**
   * A forward in our own tokens goes to the node, unless it exceeds our max_tokens ceiling or
   * overflows the engine's context (read now: a remote server's may be learned after start). The
   * origin checked its own limits, but a peer's may be larger, or lie: a peer's client must not hold
   * our engine longer than our own clients may, and an engine that does not check (the simulator)
   * would decode the whole budget. The refusal says our limits, so the origin routes such requests
   * elsewhere from then on, without holding it against us (core peer-limits.ts).
   */
  private admit(from: string, msg: PeerMessageOf<"forward">): void {
    const context = this.o.engine.info.maxContextTokens;
    const ceiling = this.o.maxTokensCeiling;
    const overContext = contextOverflow(msg.request, context);
    const over = overContext ?? ceilingOverflow(msg.request, ceiling);
    if (over === undefined) return void this.o.feed({ type: "peer-message", from, msg });
    const limits: ForwardLimits = {
      contextTokens: context,
      ...(ceiling === undefined ? {} : { maxTokens: ceiling }),
    };
    this.o.metrics.forwardsRefused.inc({ reason: overContext !== undefined ? "context" : "ceiling" });
    // Through `served`, which frees the forward's open stream now, not at its TTL.
    this.o.served.answer(from, retryableError(msg, over, limits));
  }

  /** A `send` effect: `msg` to peer `to` on the channel its type takes, unless `to` is refused. */
  send(to: string, msg: PeerMessage): void {
    const { admin, sender, served } = this.o;
    const refusal = admin.refusal(to);
    if (refusal !== undefined) {
      sender.undeliverable(to, msg, refusal);
      return;
    }
    switch (msg.type) {
      case "snapshot":
        sender.snapshot(to, { ...msg, served: this.o.ownServed() });
        return;
      case "forward":
        sender.forward(to, msg);
        return;
      case "result":
      case "error":
        // On the forward's own answer stream while it is open [Answer on the stream], else on its own.
        if (!served.answer(to, msg)) sender.reply(to, msg);
        return;
      case "goodbye":
      case "cancel":
        void sender.bestEffort(to, msg);
        return;
      case "forward-ack":
        // On the forward's own answer stream [Transport acks].
        served.ack(to, msg.reqId, msg.attempt, msg.epoch);
        return;
      default: {
        const unhandled: never = msg;
        this.o.logger.error({ msg: unhandled }, "no transport for this peer message");
      }
    }
  }
}

/** Why a forward's output budget exceeds a max_tokens ceiling of `ceiling` (none: no bound), if so. */
export function ceilingOverflow(r: { maxTokens: number }, ceiling: number | undefined): string | undefined {
  if (ceiling === undefined || r.maxTokens <= ceiling) return undefined;
  return `maxTokens (${r.maxTokens}) exceeds this node's max_tokens ceiling of ${ceiling}`;
}

/** Why a forward's prompt plus its output budget does not fit a context of `context` tokens, if so. */
export function contextOverflow(
  r: { tokens: { length: number }; maxTokens: number },
  context: number,
): string | undefined {
  if (r.tokens.length + r.maxTokens <= context) return undefined;
  return `prompt (${r.tokens.length} tokens) + maxTokens (${r.maxTokens}) exceeds this node's context of ${context} tokens`;
}
