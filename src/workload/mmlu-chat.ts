/**
 * The chat workload on real MMLU (see chat.ts): a conversation about one subject opens with the
 * subject's 5-shot prefix (or one system prompt shared by every conversation), and each turn asks a
 * test question in the hendrycks format; the history records the correct letter as its answer, in
 * the few-shot examples' own format (" X\n\n"), so after k turns the prompt reads like a
 * (5 + k)-shot prompt.
 *
 * Segments (starts, questions, the four answers) are tokenized once each, with the disk cache.
 */
import { CHAT_STARTS, CHAT_SYSTEM_PROMPT, type ChatOptions, type ChatStart, chatWorkload } from "./chat.js";
import type { ChatTopic } from "./chat-conversations.js";
import { loadMmlu, MmluError } from "./mmlu.js";
import { fewShotPrefix, formatExample } from "./prompts.js";
import { DEFAULT_ENCODING, ENCODINGS, type Encoding, tokenizePrompts } from "./tokenize.js";
import type { Workload } from "./types.js";

export interface MmluChatOptions extends ChatOptions {
  dir: string;
  start?: ChatStart;
  encoding?: Encoding;
  /** Tokenized-segment disk cache folder, or false for none (default as tokenizePrompts). */
  cacheDir?: string | false;
  /** Few-shot examples in a `few-shot` start (paper: 5). */
  k?: number;
}

const topicCache = new Map<string, Promise<ChatTopic[]>>();

/** Every subject as a chat topic, tokenized; once per process (and once per machine via the disk cache). */
export function loadMmluChatTopics(
  dir: string,
  opts: { start?: ChatStart; encoding?: Encoding; cacheDir?: string | false; k?: number } = {},
): Promise<ChatTopic[]> {
  const start = opts.start ?? "few-shot";
  const encoding = opts.encoding ?? DEFAULT_ENCODING;
  const k = opts.k ?? 5;
  if (!CHAT_STARTS.includes(start))
    throw new MmluError(`chat start must be one of ${CHAT_STARTS.join(", ")}`);
  if (!ENCODINGS.includes(encoding)) throw new MmluError(`unknown encoding ${encoding}`);
  if (!(Number.isInteger(k) && k >= 0 && k <= 5))
    throw new MmluError(`k must be an integer in [0, 5], got ${k}`);
  const key = JSON.stringify([dir, start, encoding, opts.cacheDir ?? null, k]);
  let p = topicCache.get(key);
  if (!p) {
    p = (async () => {
      const ds = await loadMmlu(dir, { minDev: start === "few-shot" ? k : 0 });
      // Distinct segment texts, each tokenized once: starts, questions, answers.
      const texts: string[] = [];
      const slot = new Map<string, number>();
      const at = (t: string) => {
        let i = slot.get(t);
        if (i === undefined) {
          i = texts.length;
          texts.push(t);
          slot.set(t, i);
        }
        return i;
      };
      const layout = ds.subjects.map((subject) => ({
        subject,
        start: at(
          start === "few-shot" ? fewShotPrefix(subject, ds.dev.get(subject) ?? [], k) : CHAT_SYSTEM_PROMPT,
        ),
        questions: (ds.test.get(subject) ?? []).map((q) => ({
          id: `${subject}/${q.index}`,
          question: at(formatExample(q, false)),
          answer: at(` ${q.answer}\n\n`),
        })),
      }));
      // An empty prefix makes tokenizePrompts encode each text whole.
      const tok = await tokenizePrompts(
        texts.map((t) => ({ prefix: "", suffix: t })),
        { encoding, cacheDir: opts.cacheDir },
      );
      const seg = (i: number) => ({ tokens: tok.tokens[i]!, text: texts[i]! });
      return layout.map((l) => ({
        group: l.subject,
        start: seg(l.start),
        questions: l.questions.map((q) => ({ id: q.id, question: seg(q.question), answer: seg(q.answer) })),
      }));
    })();
    // A failed load must not poison later attempts.
    p.catch(() => topicCache.delete(key));
    topicCache.set(key, p);
  }
  return p;
}

export async function mmluChatWorkload(opts: MmluChatOptions): Promise<Workload> {
  const topics = await loadMmluChatTopics(opts.dir, opts);
  return chatWorkload("mmlu-chat", "mmlu", topics, opts, {
    encoding: opts.encoding ?? DEFAULT_ENCODING,
    start: opts.start ?? "few-shot",
  });
}
