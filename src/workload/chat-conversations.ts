/**
 * What each chat conversation says: its topic and questions, picked by the rule in chat.ts's file
 * comment, and its tokens (and text) laid out once so every turn is a view of them.
 */
import type { Tokens } from "../core/engine.js";
import type { Prng } from "../core/prng.js";
import { sampleTurns, type TurnDistribution } from "./chat-turns.js";

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

/** Every conversation's full history, summed (4 bytes a token): 256 MB. */
export const MAX_CHAT_TOKENS = 64 * 1024 * 1024;

export interface Conversation {
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

/** Picks each conversation's topic and questions (see chat.ts's file comment). */
export function planConversations(
  topics: readonly ChatTopic[],
  o: { conversations: number; turns: TurnDistribution },
  rng: Prng,
) {
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
export function buildConversations(
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
