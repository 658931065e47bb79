/**
 * What each peer said a forward must fit (beyond the paper, whose nodes are alike): nodes of one mesh
 * may run engines of other contexts and set other max_tokens ceilings, and a node refuses a forward
 * beyond its own (retryable: the origin falls back). Such a refusal is no fault of the peer, so it
 * never counts against its trust; and it says the peer's limits, which the origin keeps so that it
 * stops sending that peer requests that would not fit (one round trip learns them, not one each).
 *
 * An older peer says none: its context refusal names the context only in its text, read for it. A
 * refusal whose stated limits the request does not exceed is no such refusal (a peer's error like any
 * other). Limits are forgotten when the peer leaves, restarts or is lost (it may come back with others).
 * Part of the origin role; pure. Bounded: one entry per member.
 */
import type { EngineRequest } from "../engine.js";
import type { ForwardLimits, NodeId, PeerMessageOf } from "./types.js";

/** An older node's context refusal (its serving runtime's `contextOverflow` text). */
const LEGACY_CONTEXT = /exceeds this node's context of (\d+) tokens$/;

/** A limit a peer said: a whole, positive count, else nothing (a peer-controlled value). */
function count(v: unknown): number | undefined {
  return typeof v === "number" && Number.isSafeInteger(v) && v > 0 ? v : undefined;
}

/** The limits a peer's error says the forward exceeded, if it is a refusal for fit (else undefined). */
export function saidLimits(msg: PeerMessageOf<"error">): ForwardLimits | undefined {
  const said = msg.limits;
  if (said !== undefined && typeof said === "object" && said !== null) {
    const l: ForwardLimits = {};
    const context = count(said.contextTokens);
    const maxTokens = count(said.maxTokens);
    if (context !== undefined) l.contextTokens = context;
    if (maxTokens !== undefined) l.maxTokens = maxTokens;
    return context === undefined && maxTokens === undefined ? undefined : l;
  }
  const legacy = typeof msg.error === "string" ? LEGACY_CONTEXT.exec(msg.error) : null;
  const context = count(Number(legacy?.[1]));
  return context === undefined ? undefined : { contextTokens: context };
}

/**
 * How much longer than our count another model's tokenizer may make the same text: a prompt in our
 * tokens (`tokenizer` set: mixed meshes) is counted again at the peer, so its context is judged
 * against our count with this slack. Generous on purpose: an honest peer's refusal must never count
 * against it, and a peer that overstates its limits only loses the requests it then is not sent.
 */
export const FOREIGN_TOKENS_SLACK = 2;

/**
 * Whether `r` exceeds `l`: its maxTokens the ceiling, or its prompt plus maxTokens the context (for
 * another model's tokens, FOREIGN_TOKENS_SLACK × our count of them could). One rule both excuses a
 * refusal for fit and keeps such requests from that peer afterwards, so a peer stating a small
 * context to refuse for free is sent none of them again.
 */
export function exceedsLimits(
  r: Pick<EngineRequest, "tokens" | "maxTokens" | "tokenizer">,
  l: ForwardLimits,
): boolean {
  if (l.maxTokens !== undefined && r.maxTokens > l.maxTokens) return true;
  if (l.contextTokens === undefined) return false;
  const prompt = r.tokenizer === undefined ? r.tokens.length : r.tokens.length * FOREIGN_TOKENS_SLACK;
  return prompt + r.maxTokens > l.contextTokens;
}

/**
 * How long a peer's stated limits are believed: a remote engine's context may be learned after its
 * node started (a refusal from that window states a smaller one), and nothing else says the limits
 * changed short of a restart. The next oversized request after this asks the peer again.
 */
export const LIMITS_TTL_MS = 300_000;

export class PeerLimits {
  private readonly held = new Map<NodeId, { limits: ForwardLimits; at: number }>();

  constructor(private readonly now: () => number) {}

  /** `id` refused a forward that exceeded `l`: its newest word on each limit holds. */
  learn(id: NodeId, l: ForwardLimits): void {
    this.held.set(id, { limits: { ...this.of(id), ...l }, at: this.now() });
  }

  /** Whether `r` fits what `id` said it takes (yes, if it said nothing or said it too long ago). */
  fits(id: NodeId, r: Pick<EngineRequest, "tokens" | "maxTokens" | "tokenizer">): boolean {
    const l = this.of(id);
    return l === undefined || !exceedsLimits(r, l);
  }

  /** What `id` said, while it is believed (LIMITS_TTL_MS). */
  of(id: NodeId): ForwardLimits | undefined {
    const e = this.held.get(id);
    if (e === undefined) return undefined;
    if (this.now() - e.at < LIMITS_TTL_MS) return e.limits;
    this.held.delete(id);
    return undefined;
  }

  forget(id: NodeId): void {
    this.held.delete(id);
  }

  clear(): void {
    this.held.clear();
  }
}
