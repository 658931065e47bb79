/**
 * A multi-turn chat workload over topics (MMLU subjects, or synthetic topics): each conversation
 * opens with its topic's start (the subject's few-shot prefix, or one system prompt shared by all)
 * and asks one question per turn; the next turn appends the previous answer and a new question to
 * the history, so the prompt — the routing key — is the whole conversation so far:
 *
 *   turn 1 = start + Q1
 *   turn k = turn k-1 + A(k-1) + Qk
 *
 * Tokens are built from separately tokenized segments (start, questions, answers) and turn k is a
 * view of the first tokens of the conversation's full token array, so turn k+1's tokens start with
 * turn k's by construction (asserted as the requests are made). Whether that equals tokenizing each
 * turn's text whole is a property of the tokenizer, checked on the real data by the tests.
 *
 * Each conversation's topic is drawn with probability proportional to its questions not yet asked
 * (so conversations cover the topics like the uniform schedule), its questions without replacement
 * within the topic; a topic whose questions are used up is reshuffled (its questions then recur in
 * later conversations, with other histories).
 *
 * Arrival:
 * - closed loop (one request in flight): `active` conversations are in progress at once and each
 *   next request is the next turn of one of them, chosen at random; a finished conversation makes
 *   room for the next one.
 * - open loop: conversations start as a Poisson process at `openLoopRate / mean turns` per second,
 *   so the request rate is `openLoopRate` in steady state; a follow-up turn is sent an exponential
 *   think time (mean `thinkMs`) after its predecessor is answered (`after` on the request).
 */
import { Prng } from "../core/prng.js";
import {
  buildConversations,
  type ChatTopic,
  type Conversation,
  planConversations,
} from "./chat-conversations.js";
import { describeTurns, meanTurns, type TurnDistribution } from "./chat-turns.js";
import { poissonArrivals } from "./schedule.js";
import type { Workload, WorkloadMeta, WorkloadRequest } from "./types.js";

/** How a conversation opens: its subject's few-shot prefix, or one system prompt shared by all. */
export const CHAT_STARTS = ["few-shot", "system"] as const;
export type ChatStart = (typeof CHAT_STARTS)[number];

/** The shared opening of `system`-start conversations; ends in "\n\n" like the few-shot prefixes. */
export const CHAT_SYSTEM_PROMPT =
  "The following is a conversation in which a user asks multiple choice questions and the assistant " +
  "answers each with the letter of the correct choice.\n\n";

/** Bounds on what a caller controls: conversations, conversations at once, think time. */
export const MAX_CONVERSATIONS = 100_000;
export const MAX_ACTIVE = 100_000;
/** Longest mean think time accepted (1 day). */
export const MAX_THINK_MS = 86_400_000;

export const DEFAULT_CONVERSATIONS = 500;
export const DEFAULT_ACTIVE = 16;
export const DEFAULT_THINK_MS = 5000;

export interface ChatOptions {
  seed: number;
  conversations: number;
  turns: TurnDistribution;
  /** Closed loop: conversations in progress at once, interleaved at random (default DEFAULT_ACTIVE). */
  active?: number;
  /** Open loop: requests per second in steady state; absent = closed loop. */
  openLoopRate?: number;
  /** Open loop: mean think time between an answer and the next turn, ms (default DEFAULT_THINK_MS). */
  thinkMs?: number;
  /**
   * "spread" (default): requests enter nodes round-robin, as in the other workloads (clients behind
   * a load balancer); "sticky": every turn of a conversation enters the same node.
   */
  entry?: "spread" | "sticky";
  /** Fix entry nodes over this many nodes (replay through real nodes). */
  nodes?: number;
  /** Keep only the first `requests` requests of the schedule. */
  requests?: number;
  maxTokens?: number;
}

function checkOptions(o: ChatOptions): void {
  const intIn = (name: string, v: number | undefined, lo: number, hi: number) => {
    if (v !== undefined && !(Number.isInteger(v) && v >= lo && v <= hi))
      throw new RangeError(`${name} must be an integer in [${lo}, ${hi}], got ${v}`);
  };
  intIn("conversations", o.conversations, 1, MAX_CONVERSATIONS);
  intIn("active conversations", o.active, 1, MAX_ACTIVE);
  intIn("requests", o.requests, 1, 10_000_000);
  intIn("nodes", o.nodes, 1, 100_000);
  intIn("seed", o.seed, 0, Number.MAX_SAFE_INTEGER);
  if (o.openLoopRate !== undefined && !(o.openLoopRate > 0 && Number.isFinite(o.openLoopRate)))
    throw new RangeError(`rate must be > 0, got ${o.openLoopRate}`);
  if (o.thinkMs !== undefined && !(o.thinkMs >= 0 && o.thinkMs <= MAX_THINK_MS))
    throw new RangeError(`think time must be in [0, ${MAX_THINK_MS}] ms, got ${o.thinkMs}`);
}

/** Closed loop: `active` conversations at a time, the next turn from one of them at random. */
function closedOrder(convs: readonly Conversation[], active: number, rng: Prng): [number, number][] {
  const order: [number, number][] = [];
  const next = new Array<number>(convs.length).fill(0);
  const open: number[] = [];
  let started = 0;
  while (open.length < active && started < convs.length) open.push(started++);
  while (open.length > 0) {
    const i = rng.int(open.length);
    const c = open[i]!;
    order.push([c, next[c]!++]);
    if (next[c] === convs[c]!.ends.length) {
      if (started < convs.length) open[i] = started++;
      else {
        open[i] = open[open.length - 1]!;
        open.pop();
      }
    }
  }
  return order;
}

/**
 * Open loop: Poisson conversation starts, exponential think times; requests listed by their
 * nominal time (start + think times, ignoring service time) so a follow-up always comes after its
 * predecessor in the list.
 */
function openOrder(convs: readonly Conversation[], o: ChatOptions, rng: Prng) {
  const convRate = o.openLoopRate! / meanTurns(o.turns);
  const starts = poissonArrivals(convs.length, convRate, rng);
  const meanThink = o.thinkMs ?? DEFAULT_THINK_MS;
  const turns: { c: number; k: number; at: number; think: number }[] = [];
  convs.forEach((conv, c) => {
    let at = starts[c]!;
    for (let k = 0; k < conv.ends.length; k++) {
      const think = k === 0 || meanThink === 0 ? 0 : -Math.log(1 - rng.next()) * meanThink;
      at += think;
      turns.push({ c, k, at, think });
    }
  });
  turns.sort((a, b) => a.at - b.at || a.c - b.c || a.k - b.k);
  return turns;
}

export function chatWorkload(
  name: string,
  source: WorkloadMeta["source"],
  topics: readonly ChatTopic[],
  o: ChatOptions,
  extra: { encoding?: string; start: string },
): Workload {
  checkOptions(o);
  const usable = topics.filter((t) => t.questions.length > 0);
  if (usable.length === 0) throw new RangeError(`workload '${name}' has no questions`);
  const root = new Prng(o.seed);
  const planRng = root.fork();
  const mixRng = root.fork();
  const arrivalRng = root.fork();
  const convs = buildConversations(usable, planConversations(usable, o, planRng));

  const open = o.openLoopRate !== undefined;
  const active = o.active ?? DEFAULT_ACTIVE;
  const schedule = open
    ? openOrder(convs, o, arrivalRng)
    : closedOrder(convs, active, mixRng).map(([c, k]) => ({ c, k, at: 0, think: 0 }));
  const kept = o.requests === undefined ? schedule : schedule.slice(0, o.requests);

  const indexOf = new Map<number, number>(); // conversation → index of its latest turn listed
  const seen = new Set<number>();
  let repeated = 0;
  let tokenSum = 0;
  const requests: WorkloadRequest[] = kept.map(({ c, k, at, think }, i) => {
    const conv = convs[c]!;
    const tokens = conv.tokens.subarray(0, conv.ends[k]!);
    const r: WorkloadRequest = {
      id: `c${c}.t${k + 1}:${conv.questions[k]!.id}`,
      tokens,
      group: usable[conv.topic]!.group,
      maxTokens: o.maxTokens ?? 1,
    };
    if (conv.text !== undefined) r.prompt = conv.text.slice(0, conv.textEnds![k]!);
    if (k > 0) {
      const prev = indexOf.get(c);
      // The turn before is listed earlier, and these tokens extend its tokens (same buffer, longer).
      if (prev === undefined || prev >= i)
        throw new Error(`chat: turn ${k + 1} of conversation ${c} before turn ${k}`);
      if (conv.ends[k - 1]! >= tokens.length)
        throw new Error(`chat: turn ${k + 1} does not extend turn ${k}`);
      r.after = { request: prev, thinkMs: think };
    } else if (open) r.arrivalMs = at;
    indexOf.set(c, i);
    if (o.entry === "sticky") r.entry = o.nodes !== undefined ? c % o.nodes : c;
    else if (o.nodes !== undefined) r.entry = i % o.nodes;
    const key = conv.keys[k]!;
    if (seen.has(key)) repeated++;
    else seen.add(key);
    tokenSum += tokens.length;
    return r;
  });

  const conversations = new Set(kept.map((t) => t.c)).size;
  const loop = open
    ? `open loop ${o.openLoopRate} requests/s, think ${o.thinkMs ?? DEFAULT_THINK_MS} ms`
    : `${Math.min(active, convs.length)} active, closed loop`;
  const meta: WorkloadMeta = {
    source,
    schedule: `chat: ${conversations} conversations, turns ${describeTurns(o.turns)}, ${extra.start} start, ${o.entry ?? "spread"} entry, ${loop}`,
    seed: o.seed,
    meanPromptTokens: requests.length > 0 ? tokenSum / requests.length : 0,
    poolSize: usable.reduce((a, t) => a + t.questions.length, 0),
    repeatedRequests: repeated,
    chat: {
      conversations,
      turns: describeTurns(o.turns),
      meanTurns: conversations > 0 ? requests.length / conversations : 0,
      start: extra.start,
    },
  };
  if (extra.encoding) meta.encoding = extra.encoding;
  return {
    name,
    synthetic: source === "synthetic",
    requests,
    arrival: open ? "open-loop" : "closed-loop",
    meta,
  };
}
