/**
 * 5-shot MMLU prompts in the standard format of hendrycks/test `evaluate.py` (format_subject,
 * format_example, gen_prompt), which the paper follows: each subject's dev examples form a few-shot
 * prefix shared by every test question of that subject — the shared prefix prefix-caching reuses.
 *
 * Byte-exact details kept from the reference:
 * - `format_subject` prepends a space to every word, so the header reads "...about  abstract algebra."
 *   (two spaces before the subject);
 * - each example is `question\nA. a\nB. b\nC. c\nD. d\nAnswer: X\n\n`; the test question ends in
 *   `\nAnswer:` with no trailing space, and the model generates one token (the letter).
 * Fields are used verbatim (no trimming), as pandas hands them to the reference.
 */
import type { MmluDataset, MmluQuestion } from "./mmlu.js";

const LETTERS = ["A", "B", "C", "D"] as const;

/** hendrycks `format_subject`: "abstract_algebra" → " abstract algebra" (leading space kept). */
export function formatSubject(subject: string): string {
  return subject
    .split("_")
    .map((w) => ` ${w}`)
    .join("");
}

/** hendrycks `format_example`: the question, its four choices and `Answer:` (+ ` X\n\n` if included). */
export function formatExample(q: MmluQuestion, includeAnswer: boolean): string {
  let s = q.question;
  for (let j = 0; j < 4; j++) s += `\n${LETTERS[j]}. ${q.choices[j]}`;
  s += "\nAnswer:";
  if (includeAnswer) s += ` ${q.answer}\n\n`;
  return s;
}

/** hendrycks `gen_prompt`: the header and the first `k` dev examples — the subject's shared prefix. */
export function fewShotPrefix(subject: string, dev: readonly MmluQuestion[], k = 5): string {
  if (dev.length < k) throw new Error(`subject '${subject}' has ${dev.length} dev examples, need ${k}`);
  let s = `The following are multiple choice questions (with answers) about ${formatSubject(subject)}.\n\n`;
  for (let i = 0; i < k; i++) s += formatExample(dev[i]!, true);
  return s;
}

export interface MmluPrompt {
  /** `<subject>/<test row index>`: stable across runs. */
  id: string;
  subject: string;
  /** The few-shot prefix (identical for every question of the subject). */
  prefix: string;
  /** The test question part: prompt = prefix + suffix. */
  suffix: string;
  prompt: string;
  answer: MmluQuestion["answer"];
}

/** Every test question of the dataset as a k-shot prompt, in subject order then file order. */
export function buildFewShotPrompts(ds: MmluDataset, opts: { k?: number } = {}): MmluPrompt[] {
  const k = opts.k ?? 5;
  const out: MmluPrompt[] = [];
  for (const subject of ds.subjects) {
    const prefix = fewShotPrefix(subject, ds.dev.get(subject) ?? [], k);
    for (const q of ds.test.get(subject) ?? []) {
      const suffix = formatExample(q, false);
      out.push({
        id: `${subject}/${q.index}`,
        subject,
        prefix,
        suffix,
        prompt: prefix + suffix,
        answer: q.answer,
      });
    }
  }
  return out;
}
