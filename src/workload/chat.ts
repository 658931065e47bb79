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
import type { Tokens } from "../core/engine.js";
import { Prng } from "../core/prng.js";
import { poissonArrivals } from "./schedule.js";
import type { Workload, WorkloadMeta, WorkloadRequest } from "./types.js";

/** How a conversation opens: its subject's few-shot prefix, or one system prompt shared by all. */
export const CHAT_STARTS = ["few-shot", "system"] as const;
export type ChatStart = (typeof CHAT_STARTS)[number];

/** The shared opening of `system`-start conversations; ends in "\n\n" like the few-shot prefixes. */
export const CHAT_SYSTEM_PROMPT =
  "The following is a conversation in which a user asks multiple choice questions and the assistant " +
  "answers each with the letter of the correct choice.\n\n";

export interface ChatSegment {
  tokens: Tokens;
  /** The segment's text, when the pool has text (the turn's prompt is the concatenation). */
  text?: string;
}

export interface ChatQuestion {
  /** Stable id of the question (e.g. "anatomy/12"). */
  id: string;
  /** The question as asked (MMLU: the question, its choices and "Answer:"). */
  question: ChatSegment;
  /** What the history records as its answer (MMLU: " X\n\n", the correct letter). */
  answer: ChatSegment;
}

export interface ChatTopic {
  group: string;
  /** What every conversation of this topic starts with. */
  start: ChatSegment;
  questions: readonly ChatQuestion[];
}

export type TurnDistribution =
  | { kind: "fixed"; turns: number }
  | { kind: "uniform"; min: number; max: number }
  /** 1 + Geometric, mean `mean`, truncated at MAX_TURNS. */
  | { kind: "geometric"; mean: number };

/** Bounds on what a caller controls: turns per conversation, conversations, tokens held in all. */
export const MAX_TURNS = 256;
export const MAX_CONVERSATIONS = 100_000;
export const MAX_ACTIVE = 100_000;
/** Every conversation's full history, summed (4 bytes a token): 256 MB. */
export const MAX_CHAT_TOKENS = 64 * 1024 * 1024;
/** Longest mean think time accepted (1 day). */
export const MAX_THINK_MS = 86_400_000;

export const DEFAULT_TURNS = "2-8";
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

/** `8` (fixed), `2-8` (uniform), `geo:5` (geometric, mean 5). */
export function parseTurns(spec: string): TurnDistribution {
  const s = spec.trim();
  const int = (x: string) => (/^\d+$/.test(x) ? Number(x) : Number.NaN);
  const inRange = (n: number) => Number.isInteger(n) && n >= 1 && n <= MAX_TURNS;
  let m: RegExpExecArray | null;
  if (/^\d+$/.test(s)) {
    const turns = int(s);
    if (!inRange(turns)) throw new RangeError(`turns must be in [1, ${MAX_TURNS}], got ${spec}`);
    return { kind: "fixed", turns };
  }
  m = /^(\d+)-(\d+)$/.exec(s);
  if (m) {
    const min = int(m[1]!);
    const max = int(m[2]!);
    if (!(inRange(min) && inRange(max) && min <= max))
      throw new RangeError(`turns range must be MIN-MAX with 1 ≤ MIN ≤ MAX ≤ ${MAX_TURNS}, got ${spec}`);
    return min === max ? { kind: "fixed", turns: min } : { kind: "uniform", min, max };
  }
  m = /^geo:(\d+(?:\.\d+)?)$/.exec(s);
  if (m) {
    const mean = Number(m[1]);
    if (!(mean >= 1 && mean <= MAX_TURNS / 4))
      throw new RangeError(`geometric mean turns must be in [1, ${MAX_TURNS / 4}], got ${spec}`);
    return { kind: "geometric", mean };
  }
  throw new RangeError(`turns must look like N, MIN-MAX or geo:MEAN (e.g. 8, 2-8, geo:5), got '${spec}'`);
}

export function describeTurns(d: TurnDistribution): string {
  if (d.kind === "fixed") return `${d.turns}`;
  if (d.kind === "uniform") return `uniform ${d.min}-${d.max}`;
  return `geometric mean ${d.mean} (≤ ${MAX_TURNS})`;
}

/** The distribution's exact mean (the geometric one truncated at MAX_TURNS). */
export function meanTurns(d: TurnDistribution): number {
  if (d.kind === "fixed") return d.turns;
  if (d.kind === "uniform") return (d.min + d.max) / 2;
  const q = 1 - 1 / d.mean;
  return q === 0 ? 1 : (1 - q ** MAX_TURNS) / (1 - q);
}

function sampleTurns(d: TurnDistribution, rng: Prng): number {
  if (d.kind === "fixed") return d.turns;
  if (d.kind === "uniform") return d.min + rng.int(d.max - d.min + 1);
  if (d.mean === 1) return 1;
  // Inversion: P(n > k) = q^k; 1 - u lies in (0, 1], so the log is finite.
  const n = 1 + Math.floor(Math.log(1 - rng.next()) / Math.log(1 - 1 / d.mean));
  return Math.min(MAX_TURNS, n);
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

interface Conversation {
  topic: number;
  questions: ChatQuestion[];
  /** The whole conversation's tokens; turn k is its first `ends[k]` tokens. */
  tokens: Uint32Array;
  ends: number[];
  text?: string;
  textEnds?: number[];
  /** Per turn: a small id of (topic, question ids so far), equal iff the prompts are. */
  keys: number[];
}

/** Picks each conversation's topic and questions (see the file comment). */
function planConversations(topics: readonly ChatTopic[], o: ChatOptions, rng: Prng) {
  const queues = topics.map(() => [] as number[]);
  const remaining = topics.map((t) => t.questions.length);
  const refill = (t: number) => {
    queues[t] = rng.shuffle(Array.from({ length: topics[t]!.questions.length }, (_, i) => i));
    remaining[t] = queues[t]!.length;
  };
  topics.forEach((_, t) => {
    refill(t);
  });
  const plans: { topic: number; questions: ChatQuestion[] }[] = [];
  let tokens = 0;
  for (let c = 0; c < o.conversations; c++) {
    const n = sampleTurns(o.turns, rng);
    let total = remaining.reduce((a, b) => a + b, 0);
    if (total === 0) {
      topics.forEach((_, t) => {
        refill(t);
      });
      total = remaining.reduce((a, b) => a + b, 0);
    }
    let u = rng.next() * total;
    let topic = 0;
    while (topic < topics.length - 1 && u >= remaining[topic]!) u -= remaining[topic++]!;
    const qs: ChatQuestion[] = [];
    tokens += topics[topic]!.start.tokens.length;
    for (let k = 0; k < n; k++) {
      if (queues[topic]!.length === 0) refill(topic);
      const q = topics[topic]!.questions[queues[topic]!.pop()!]!;
      qs.push(q);
      remaining[topic] = queues[topic]!.length;
      tokens += q.question.tokens.length + (k + 1 < n ? q.answer.tokens.length : 0);
    }
    // Checked as planned, before anything is allocated.
    if (tokens > MAX_CHAT_TOKENS) {
      throw new RangeError(
        `the conversations hold more than ${MAX_CHAT_TOKENS} tokens in all: ask for fewer conversations or turns`,
      );
    }
    plans.push({ topic, questions: qs });
  }
  return plans;
}

/** Lays out every conversation's tokens (and text) once; turns are views of them. */
function buildConversations(
  topics: readonly ChatTopic[],
  plans: ReturnType<typeof planConversations>,
): Conversation[] {
  // One small id per distinct prompt: (parent prompt id, question id) → id.
  const ids = new Map<string, number>();
  const idOf = (k: string) => {
    let v = ids.get(k);
    if (v === undefined) {
      v = ids.size;
      ids.set(k, v);
    }
    return v;
  };
  return plans.map((p) => {
    const topic = topics[p.topic]!;
    const withText =
      topic.start.text !== undefined && p.questions.every((q) => q.question.text !== undefined);
    const segs: ChatSegment[] = [topic.start];
    p.questions.forEach((q, k) => {
      segs.push(q.question);
      if (k + 1 < p.questions.length) segs.push(q.answer);
    });
    const tokens = new Uint32Array(segs.reduce((a, s) => a + s.tokens.length, 0));
    const ends: number[] = [];
    const textEnds: number[] = [];
    const keys: number[] = [];
    let at = 0;
    let text = "";
    let key = idOf(`start:${topic.group}`);
    segs.forEach((s, i) => {
      tokens.set(s.tokens, at);
      at += s.tokens.length;
      if (withText) text += s.text ?? "";
      // Odd segments are questions: a turn ends after each.
      if (i % 2 === 1) {
        ends.push(at);
        textEnds.push(text.length);
        key = idOf(`${key}:${p.questions[(i - 1) / 2]!.id}`);
        keys.push(key);
      }
    });
    const conv: Conversation = { topic: p.topic, questions: p.questions, tokens, ends, keys };
    if (withText) {
      conv.text = text;
      conv.textEnds = textEnds;
    }
    return conv;
  });
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
