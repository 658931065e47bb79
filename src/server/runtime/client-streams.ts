/**
 * The client requests this node is the origin of, from admission to their one answer: each waiting
 * client's slot, which request object its output belongs to, and a streaming client's output across a
 * fallback (the splice).
 *
 * The splice: a fallback after partial output. Under greedy decoding (temperature 0) the new node
 * produces the same text (same model on every node), so the client's stream goes on from where it
 * stopped: the new source's output is checked against what was sent and only what is new is relayed.
 * Sampling, any disagreement, or a fallback whose answer stops short of what was sent cannot be
 * spliced: the stream ends with an error instead.
 */
import type { EngineRequest } from "../../core/engine.js";
import { retryAfterSec } from "../../core/node/replies.js";
import type { NodeInput, ReplyOutcome } from "../../core/node/types.js";
import {
  type ClientLink,
  type InferenceInput,
  type ServeEvents,
  type ServeOutcome,
  ServiceError,
} from "../service.js";

interface ClientSlot {
  /** The node's request object: the key of this client's output sink. */
  request: EngineRequest;
  events: ServeEvents;
  resolve(o: ServeOutcome): void;
  reject(e: Error): void;
  /** Which node produced the output already relayed (streaming), if any. */
  relayedFrom: string | undefined;
  /**
   * Which of its streams (`relay`'s `stream`): a forward sent again to a restarted peer streams its
   * new process's output from the start, to be spliced as another source's, not appended.
   */
  relayedStream: string | undefined;
  /**
   * The stream whose answer the node is being fed now (`answering`): the answer is that stream's run's,
   * which may be another process's than the one whose chunks were relayed (a peer that restarted).
   */
  answerStream?: string | undefined;
  /** All text relayed to the client so far. */
  sent: string;
  /** After a fallback: how much of `sent` the new source has reproduced so far (see relay). */
  replayed: number;
  /** Greedy decoding (temperature 0): the same model gives the same text on any node. */
  greedy: boolean;
  done: boolean;
  /** The client's deadline timer (`expireAfter`), cleared with the answer. */
  deadline?: NodeJS.Timeout;
}

/** The request the node runs for a client's input, under the client request's id (`stream`: it streams). */
export function engineRequestOf(reqId: string, input: InferenceInput, stream = false): EngineRequest {
  const request: EngineRequest = {
    id: reqId,
    tokens: input.tokens,
    prompt: input.prompt,
    maxTokens: input.maxTokens,
  };
  if (stream) request.stream = true;
  if (input.temperature !== undefined) request.temperature = input.temperature;
  if (input.topP !== undefined) request.topP = input.topP;
  if (input.seed !== undefined) request.seed = input.seed;
  if (input.presencePenalty !== undefined) request.presencePenalty = input.presencePenalty;
  if (input.frequencyPenalty !== undefined) request.frequencyPenalty = input.frequencyPenalty;
  if (input.stop) request.stop = input.stop;
  if (input.cacheSalt !== undefined) request.cacheSalt = input.cacheSalt;
  if (input.adapter !== undefined) request.adapter = input.adapter;
  if (input.model !== undefined) request.model = input.model;
  if (input.tokenizer !== undefined) request.tokenizer = input.tokenizer;
  if (input.messages !== undefined) request.messages = input.messages;
  if (input.requestId !== undefined) request.traceId = input.requestId;
  if (input.deadlineMs !== undefined) request.deadlineMs = input.deadlineMs;
  return request;
}

const STATUS_OF = {
  overloaded: 429,
  invalid: 400,
  engine: 502,
  unserved: 503,
  deadline: 429,
  unavailable: 503,
} as const;

/** What a client sees for a node's error reply. */
export function serviceErrorOf(outcome: Extract<ReplyOutcome, { ok: false }>): ServiceError {
  const status = STATUS_OF[outcome.code];
  const type =
    status === 429 ? "rate_limit_error" : status === 400 ? "invalid_request_error" : "server_error";
  // Retry-After: the node's estimate of when its queue drains back under its wait bound, else 1 s.
  const code = outcome.code === "deadline" ? "deadline_unmeetable" : undefined;
  return new ServiceError(status, type, outcome.error, retryAfterSec(outcome), code);
}

type ClientGone = Extract<NodeInput, { type: "client-gone" }>;

export class ClientStreams {
  private readonly slots = new Map<string, ClientSlot>();
  /**
   * Which client each running request's output goes to. Weak, so a corner case that never answers
   * leaks nothing; deleted as soon as the answer is given all the same, so the common case leaves no
   * ephemeron for the scavenger to trace (it kept each request's graph alive a while longer).
   */
  private readonly byRequest = new WeakMap<EngineRequest, string>();

  /**
   * `gone`: the node's `client-gone` input for a client that hung up, or whose deadline passed,
   * before its answer (the node then drops the request's work).
   */
  constructor(private readonly gone: (input: ClientGone) => void = () => {}) {}

  /** Clients waiting for their answer. */
  get size(): number {
    return this.slots.size;
  }

  /** Admits client request `reqId`: the returned promise settles with its one answer. */
  open(reqId: string, request: EngineRequest, events: ServeEvents, link: ClientLink): Promise<ServeOutcome> {
    return new Promise<ServeOutcome>((resolve, reject) => {
      this.slots.set(reqId, {
        request,
        events,
        resolve,
        reject,
        relayedFrom: undefined,
        relayedStream: undefined,
        sent: "",
        replayed: 0,
        greedy: (request.temperature ?? 0) === 0,
        done: false,
      });
      this.byRequest.set(request, reqId);
      link.onGone = this.hangUpHandler(reqId);
    });
  }

  /**
   * What a client hanging up before its answer does: its slot ends, and the node is told (`gone`: its
   * `client-gone` input), so the request's queued or forwarded work is dropped and no answer comes.
   * Made here, not inline in `open`: a closure there would share open's
   * context — the request, the API's events, and through them the whole HTTP exchange — and keep that
   * alive past its answer, for every scavenge to copy, lengthening its pauses (BENCHMARKS.md, "Router
   * overhead").
   */
  private hangUpHandler(reqId: string): () => void {
    return () => {
      if (this.fail(reqId, new ServiceError(499, "aborted", "client gone")))
        this.gone({ type: "client-gone", reqId, reason: "hangup" });
    };
  }

  /** The streaming client `request`'s output goes to, if any (a client taking it whole has none). */
  streamingFor(request: EngineRequest): string | undefined {
    const reqId = this.byRequest.get(request);
    if (reqId === undefined) return undefined;
    return this.slots.get(reqId)?.events.onChunk ? reqId : undefined;
  }

  /**
   * Output from node `source` for streaming client `reqId` (one the node waits on now): relayed, or
   * spliced after a fallback or from another `stream` of the same source (a forward sent again);
   * output that cannot be spliced ends the stream with an error.
   */
  relay(reqId: string, source: string, text: string, stream = source): void {
    const slot = this.slots.get(reqId);
    if (!slot?.events.onChunk) return;
    if (slot.relayedStream !== undefined && slot.relayedStream !== stream) {
      if (!slot.greedy) {
        this.failMidStream(reqId, slot);
        return;
      }
      slot.replayed = 0;
    }
    slot.relayedFrom = source;
    slot.relayedStream = stream;
    let fresh = text;
    if (slot.replayed < slot.sent.length) {
      const overlap = Math.min(text.length, slot.sent.length - slot.replayed);
      if (text.slice(0, overlap) !== slot.sent.slice(slot.replayed, slot.replayed + overlap)) {
        this.failMidStream(reqId, slot);
        return;
      }
      slot.replayed += overlap;
      fresh = text.slice(overlap);
    }
    if (fresh.length === 0) return;
    slot.sent += fresh;
    slot.replayed = slot.sent.length;
    slot.events.onChunk(fresh, source);
  }

  /**
   * Feeds the node (`feed`) a forward's answer that came on stream `on.stream` (peer-sender.ts): the
   * answer it makes for `on.request`'s client, if any, is then that stream's, not just its node's.
   */
  answering(on: { request: EngineRequest; stream: string } | undefined, feed: () => void): void {
    const reqId = on && this.byRequest.get(on.request);
    const slot = reqId === undefined ? undefined : this.slots.get(reqId);
    if (slot) slot.answerStream = on?.stream;
    try {
      feed();
    } finally {
      if (slot) slot.answerStream = undefined;
    }
  }

  /** The request client `reqId` waits on, while it waits. */
  requestOf(reqId: string): EngineRequest | undefined {
    return this.slots.get(reqId)?.request;
  }

  /**
   * The node's answer to client `reqId`. False if it cannot be the answer: a fallback that stopped
   * short of what the client was already sent (the stream then ends with an error).
   */
  answer(reqId: string, outcome: ServeOutcome): boolean {
    const slot = this.slots.get(reqId);
    if (slot && !this.catchUp(reqId, slot, outcome)) return false;
    if (slot && slot.replayed < slot.sent.length) {
      this.failMidStream(reqId, slot);
      return false;
    }
    this.finish(reqId, undefined, outcome);
    return true;
  }

  /**
   * A streaming client's answer from a node whose output did not (all) stream to it — a late answer,
   * or a hedged one before our own run began (core/node/hedge.ts), or the rest of a source cut off
   * when the node fell back from it: what the client lacks goes out before the answer, after what was
   * sent when that is its prefix (another node's only under greedy decoding). False (the stream
   * ended with an error) when it cannot continue what was sent.
   */
  private catchUp(reqId: string, slot: ClientSlot, outcome: ServeOutcome): boolean {
    if (!slot.events.onChunk) return true;
    const text = outcome.result.text;
    // Not known to have come on a stream (our own run, or an answer on a request of its own): its node's.
    const stream = slot.answerStream ?? outcome.servedBy;
    // The stream whose chunks streamed: only a longer text with what was sent as its prefix adds
    // anything (an engine's last chunk may differ slightly from its final text: left as it is).
    if (slot.relayedStream === stream) {
      if (text.length <= slot.sent.length || !text.startsWith(slot.sent)) return true;
    } else if (
      slot.sent.length > 0 &&
      // Another stream of the same node may be another run (a restarted peer's), sampled or not: it
      // must continue what was sent. A copy of the same run's forward passes when the run's final text
      // extends its chunks; one that rewrites its tail ends the stream, the price of not telling them apart.
      (!text.startsWith(slot.sent) || (!slot.greedy && slot.relayedFrom !== outcome.servedBy))
    ) {
      this.failMidStream(reqId, slot);
      return false;
    }
    const fresh = text.slice(slot.sent.length);
    slot.relayedFrom = outcome.servedBy;
    slot.relayedStream = stream;
    slot.sent = text;
    slot.replayed = text.length;
    if (fresh.length > 0) slot.events.onChunk(fresh, outcome.servedBy);
    return true;
  }

  /** A client deadline (core/node/deadline.ts) that passes before the answer: 504; a later answer is dropped. */
  expireAfter(reqId: string, ms: number): void {
    const slot = this.slots.get(reqId);
    if (!slot) return;
    slot.deadline = setTimeout(() => {
      const why = `deadline: no answer within the request's ${ms} ms (x-prefixmesh-deadline-ms)`;
      // Answered 504, the client waits no more: its queued or forwarded work is for nobody, as a hang-up's.
      if (this.fail(reqId, new ServiceError(504, "server_error", why, undefined, "deadline_exceeded")))
        this.gone({ type: "client-gone", reqId, reason: "deadline" });
    }, ms);
  }

  /** Ends client `reqId` with an error (a no-op, false, once it has its answer). */
  fail(reqId: string, err: Error): boolean {
    return this.finish(reqId, err, undefined);
  }

  /** Ends every waiting client with `err` (shutdown). */
  failAll(err: () => Error): void {
    for (const reqId of [...this.slots.keys()]) this.fail(reqId, err());
  }

  private failMidStream(reqId: string, slot: ClientSlot): void {
    this.fail(
      reqId,
      new ServiceError(
        502,
        "server_error",
        `node ${slot.relayedFrom} failed mid-stream after partial output`,
      ),
    );
  }

  private finish(reqId: string, err: Error | undefined, ok: ServeOutcome | undefined): boolean {
    const slot = this.slots.get(reqId);
    if (!slot || slot.done) return false;
    slot.done = true;
    clearTimeout(slot.deadline);
    this.slots.delete(reqId);
    this.byRequest.delete(slot.request);
    if (err) slot.reject(err);
    else if (ok) slot.resolve(ok);
    return true;
  }
}
