/**
 * A synthetic, MMLU-shaped workload so every command works without the dataset.
 *
 * Shape measured on the real 5-shot MMLU prompts tokenized with cl100k_base:
 * - 57 topics with each MMLU subject's test count and few-shot prefix length (14,042 prompts; mean
 *   prefix 506 tokens) — see MMLU_SUBJECT_SHAPES;
 * - per-question suffix ~ lognormal with that subject's measured log-mean and log-sd (mean 105 tokens);
 * - more topics than 57 cycle through the shapes;
 * - 30% of questions open with one of 8 common stems ("Which of the following…"-like), as real
 *   questions do, so prompts share a little beyond the prefix;
 * - token ids < 100,000 from a seeded generator.
 * The prompt contents depend only on `poolSeed`; `seed` drives the schedule, as with real MMLU.
 */
import { hashString, Prng } from "../core/prng.js";
import { assembleWorkload, type PoolItem, type ScheduleChoice, scheduleName } from "./assemble.js";
import { CHAT_SYSTEM_PROMPT, type ChatOptions, type ChatStart, chatWorkload } from "./chat.js";
import type { ChatSegment, ChatTopic } from "./chat-conversations.js";
import type { SkewOptions } from "./schedule.js";
import type { Workload } from "./types.js";

/**
 * Per MMLU subject (sorted order), measured on the real data with cl100k_base: [test questions,
 * 5-shot prefix tokens, mean and sd of ln(question tokens)]. Statistics only, no MMLU content.
 * Sizes and lengths are correlated in MMLU (professional_law: 1,534 questions, 1,370-token prefix),
 * so drawing them independently would get the mean prompt wrong (523 vs the real 685 tokens).
 */
export const MMLU_SUBJECT_SHAPES: readonly (readonly [number, number, number, number])[] = [
  [100, 292, 4.11, 0.29],
  [135, 275, 4.06, 0.32],
  [152, 491, 4.2, 0.35],
  [100, 479, 4.23, 0.34],
  [265, 323, 4.02, 0.29],
  [144, 380, 4.24, 0.42],
  [100, 454, 4.25, 0.42],
  [100, 705, 4.57, 0.42],
  [100, 498, 4.31, 0.38],
  [173, 380, 4.35, 0.62],
  [102, 405, 4.35, 0.29],
  [100, 296, 4.02, 0.49],
  [235, 244, 3.75, 0.25],
  [114, 500, 4.52, 0.37],
  [145, 377, 3.79, 0.26],
  [378, 452, 4.08, 0.35],
  [126, 480, 4.57, 0.41],
  [100, 330, 3.9, 0.28],
  [310, 419, 4.26, 0.4],
  [203, 399, 4.29, 0.43],
  [100, 744, 4.5, 0.59],
  [165, 2434, 5.78, 0.36],
  [198, 307, 3.81, 0.27],
  [193, 379, 4.19, 0.29],
  [390, 291, 4.11, 0.3],
  [270, 444, 4.2, 0.34],
  [238, 313, 4.17, 0.32],
  [151, 446, 4.51, 0.35],
  [545, 415, 4.05, 0.39],
  [216, 662, 4.69, 0.37],
  [204, 1898, 5.68, 0.26],
  [237, 1068, 5.77, 0.38],
  [223, 254, 3.84, 0.24],
  [131, 267, 3.96, 0.35],
  [121, 533, 4.45, 0.28],
  [108, 311, 4.14, 0.34],
  [163, 364, 4.14, 0.38],
  [112, 574, 4.25, 0.39],
  [103, 223, 3.73, 0.21],
  [234, 329, 3.97, 0.26],
  [100, 270, 3.94, 0.26],
  [783, 235, 3.76, 0.38],
  [346, 393, 4.14, 0.33],
  [895, 535, 4.64, 0.07],
  [306, 501, 4.14, 0.38],
  [311, 255, 3.97, 0.37],
  [324, 433, 4.09, 0.35],
  [282, 544, 4.52, 0.33],
  [1534, 1370, 5.44, 0.42],
  [272, 893, 5.15, 0.35],
  [612, 482, 4.24, 0.38],
  [110, 332, 3.93, 0.38],
  [245, 994, 4.9, 0.53],
  [201, 360, 4.18, 0.28],
  [100, 345, 4.06, 0.26],
  [166, 270, 3.94, 0.32],
  [171, 213, 3.7, 0.17],
];

const VOCAB = 100_000;
const STEMS = 8;
const STEM_SHARE = 0.3;

export interface SyntheticOptions extends ScheduleChoice {
  /** Number of topics (default 57). Shapes cycle through MMLU's subjects; sizes scaled by `scale`. */
  subjects?: number;
  /** Multiplies every topic's question count (default 1); e.g. 0.1 for a quick test pool. */
  scale?: number;
  skewed?: boolean | Partial<SkewOptions>;
  /** Seed of the prompt contents (default fixed), independent of the schedule seed. */
  poolSeed?: number;
  /**
   * Also produce prompt text, one of these words per token (`commonWords()`, src/workload/common-words.ts);
   * off by default to keep the pool cheap.
   */
  text?: readonly string[];
}

function lognormal(rng: Prng, mu: number, sigma: number): number {
  // Box–Muller; 1 - u keeps the log finite.
  const z = Math.sqrt(-2 * Math.log(1 - rng.next())) * Math.cos(2 * Math.PI * rng.next());
  return Math.exp(mu + sigma * z);
}

function randomTokens(rng: Prng, n: number, out: Uint32Array, at: number): void {
  for (let i = 0; i < n; i++) out[at + i] = rng.int(VOCAB);
}

function clampLen(x: number, lo: number, hi: number): number {
  return Math.max(lo, Math.min(hi, Math.round(x)));
}

export function topicName(t: number): string {
  return `topic_${String(t).padStart(2, "0")}`;
}

/** The prompt pool: every synthetic question of every topic. */
export function syntheticPool(opts: Omit<SyntheticOptions, "seed"> = {}): PoolItem[] {
  const subjects = opts.subjects ?? 57;
  const scale = opts.scale ?? 1;
  if (!(Number.isInteger(subjects) && subjects >= 1 && subjects <= 10_000)) {
    throw new RangeError(`subjects must be an integer in [1, 10000], got ${subjects}`);
  }
  if (!(scale > 0 && scale <= 100)) throw new RangeError(`scale must be in (0, 100], got ${scale}`);
  const rng = new Prng(opts.poolSeed ?? 0x5eed);
  const stems = Array.from({ length: STEMS }, () => {
    const s = new Uint32Array(3 + rng.int(4));
    randomTokens(rng, s.length, s, 0);
    return s;
  });
  const items: PoolItem[] = [];
  for (let t = 0; t < subjects; t++) {
    const group = topicName(t);
    const [size, prefixLen, mu, sigma] = MMLU_SUBJECT_SHAPES[t % MMLU_SUBJECT_SHAPES.length]!;
    const prefix = new Uint32Array(prefixLen);
    randomTokens(rng, prefixLen, prefix, 0);
    const count = Math.max(1, Math.round(size * scale));
    for (let q = 0; q < count; q++) {
      const sufLen = clampLen(lognormal(rng, mu, sigma), 16, 1024);
      const tokens = new Uint32Array(prefixLen + sufLen);
      tokens.set(prefix, 0);
      let at = prefixLen;
      if (rng.chance(STEM_SHARE)) {
        const stem = stems[rng.int(STEMS)]!.subarray(0, sufLen);
        tokens.set(stem, at);
        at += stem.length;
      }
      randomTokens(rng, tokens.length - at, tokens, at);
      const item: PoolItem = { id: `${group}/${q}`, group, tokens, prefixLength: prefixLen };
      if (opts.text) item.prompt = pseudoText(group, tokens, opts.text);
      items.push(item);
    }
  }
  return items;
}

/**
 * Text for token ids, one word per id. Ids map onto the words modulo their count, so two prompts that
 * share a prefix of ids share it as text; unrelated prompts coincide on a word 1 time in `words.length`,
 * which leaves the workload's sharing structure (shared system prompts and stems) as it is.
 */
export function wordsFor(tokens: ArrayLike<number>, words: readonly string[]): string {
  const out: string[] = new Array(tokens.length);
  for (let i = 0; i < tokens.length; i++) out[i] = words[(tokens[i] as number) % words.length] as string;
  return out.join(" ");
}

/** One word per token under an MMLU-like header: deterministic text with the same sharing structure. */
function pseudoText(group: string, tokens: Uint32Array, words: readonly string[]): string {
  if (words.length === 0) throw new RangeError("text needs at least one word");
  return `The following are multiple choice questions (with answers) about ${group.replace("_", " ")}.\n\n${wordsFor(tokens, words)}\nAnswer:`;
}

/** The synthetic workload: same schedules as MMLU (uniform / skewed, repeats, open loop). */
export function syntheticMmlu(opts: SyntheticOptions): Workload {
  const items = syntheticPool(opts);
  const name = scheduleName("synthetic", opts.skewed);
  return assembleWorkload(name, "synthetic", items, opts);
}

/** Token ids outside the pool's vocabulary for the chat answers: a letter, then the "\n\n" that ends it. */
const ANSWER_LETTER_BASE = VOCAB;
const ANSWER_END = VOCAB + 4;
/** Tokens of the synthetic system prompt (about what CHAT_SYSTEM_PROMPT takes in cl100k). */
const SYSTEM_TOKENS = 28;

export interface SyntheticChatOptions extends ChatOptions, Omit<SyntheticOptions, keyof ScheduleChoice> {
  start?: ChatStart;
}

/**
 * The synthetic pool as chat topics: each topic's few-shot prefix (or a system prompt shared by all)
 * opens its conversations; a question is a pool question without the prefix; its answer is one of
 * four letters (chosen by a hash of the question id) and an end-of-example token.
 */
export function syntheticChatTopics(
  opts: Omit<SyntheticOptions, "seed"> & { start?: ChatStart } = {},
): ChatTopic[] {
  const items = syntheticPool(opts);
  const start = opts.start ?? "few-shot";
  let system: ChatSegment | undefined;
  if (start === "system") {
    // Its own stream, so the pool is the same with either start.
    const rng = new Prng(((opts.poolSeed ?? 0x5eed) ^ 0x5157) >>> 0);
    const tokens = new Uint32Array(SYSTEM_TOKENS);
    randomTokens(rng, SYSTEM_TOKENS, tokens, 0);
    system = { tokens, ...(opts.text ? { text: CHAT_SYSTEM_PROMPT } : {}) };
  }
  const topics = new Map<string, ChatTopic & { questions: ChatTopic["questions"][number][] }>();
  for (const it of items) {
    const cut = it.prefixLength ?? 0;
    const tokens = it.tokens as Uint32Array;
    let t = topics.get(it.group);
    if (!t) {
      const prefix = tokens.subarray(0, cut);
      const header = `The following are multiple choice questions (with answers) about ${it.group.replace("_", " ")}.\n\n`;
      t = {
        group: it.group,
        start: system ?? {
          tokens: prefix,
          ...(opts.text ? { text: `${header}${wordsFor(prefix, opts.text)}` } : {}),
        },
        questions: [],
      };
      topics.set(it.group, t);
    }
    const letter = hashString(it.id) % 4;
    const question = tokens.subarray(cut);
    const answer = Uint32Array.of(ANSWER_LETTER_BASE + letter, ANSWER_END);
    t.questions.push({
      id: it.id,
      question: {
        tokens: question,
        ...(opts.text ? { text: ` ${wordsFor(question, opts.text)}\nAnswer:` } : {}),
      },
      answer: { tokens: answer, ...(opts.text ? { text: ` ${"ABCD"[letter]}\n\n` } : {}) },
    });
  }
  return [...topics.values()];
}

/** The synthetic chat workload: MMLU-shaped topics, the same conversation schedules as mmlu-chat. */
export function syntheticChat(opts: SyntheticChatOptions): Workload {
  return chatWorkload("synthetic-chat", "synthetic", syntheticChatTopics(opts), opts, {
    start: opts.start ?? "few-shot",
  });
}
