/**
 * Frequent English words, for prompt text that stands for token ids (synthetic workloads replayed
 * through a real node's API). Each is one token in GPT-style vocabularies, in the generated model's
 * (built from the same ranks, src/engines/gguf/vocab.ts) and in the sim engine's word tokenizer, so a
 * prompt of N token ids is about N tokens for every engine, as the workload's lengths mean.
 */
import { decode } from "gpt-tokenizer/encoding/r50k_base";

/** How many words: few enough that each is a single piece of a small (4096) vocabulary. */
export const COMMON_WORD_COUNT = 1000;

/** The first `n` lowercase words of GPT-2's BPE ranks (roughly frequency order), distinct. */
export function commonWords(n = COMMON_WORD_COUNT): string[] {
  const words: string[] = [];
  for (let id = 256; id < 50_000 && words.length < n; id++) {
    const piece = decode([id]);
    if (/^ [a-z]{2,}$/.test(piece)) words.push(piece.slice(1));
  }
  if (words.length < n) throw new Error(`only ${words.length} common words, ${n} asked for`);
  return words;
}
