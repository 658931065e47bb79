/**
 * A small SentencePiece-style (llama "spm") vocabulary for generated models: control tokens, the 256
 * byte tokens llama.cpp requires, printable ASCII, and English word pieces taken in frequency order
 * from GPT-2's BPE ranks (gpt-tokenizer), closed under prefixes so llama.cpp's bigram merging can
 * reach every piece. Anything else falls back to bytes, so any text round-trips.
 */
import { decode } from "gpt-tokenizer/encoding/r50k_base";
import { TokenType } from "./format.js";

export interface SpmVocab {
  tokens: string[];
  scores: Float32Array;
  types: Int32Array;
}

const SPACE = "\u2581"; // SentencePiece's visible space
const PIECE = /^ ?[A-Za-z0-9]+$|^ ?[!-/:-@[-`{-~]{1,2}$/;

export function buildSpmVocab(size: number): SpmVocab {
  const tokens: string[] = ["<unk>", "<s>", "</s>"];
  const types: number[] = [TokenType.UNKNOWN, TokenType.CONTROL, TokenType.CONTROL];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(TokenType.BYTE);
  }
  const seen = new Set<string>();
  const pieces: string[] = [];
  const add = (p: string) => {
    if (!seen.has(p)) {
      seen.add(p);
      pieces.push(p);
    }
  };
  add(SPACE);
  for (let c = 0x21; c < 0x7f; c++) add(String.fromCharCode(c));
  const budget = size - tokens.length;
  // GPT-2 ranks are roughly merge (frequency) order; ids 0-255 are raw bytes, skipped.
  for (let id = 256; id < 50_000 && pieces.length < budget; id++) {
    const text = decode([id]);
    if (!PIECE.test(text)) continue;
    const piece = text.replace(" ", SPACE);
    const chars = [...piece];
    // Prefix closure: every intermediate of the merge chain is itself a piece.
    for (let n = 2; n <= chars.length && pieces.length < budget; n++) add(chars.slice(0, n).join(""));
  }
  if (pieces.length < budget) throw new Error(`vocabulary size ${size} is larger than the piece source`);
  const scores = new Float32Array(tokens.length + pieces.length);
  pieces.forEach((p, i) => {
    tokens.push(p);
    types.push(TokenType.NORMAL);
    // Longer pieces first, then earlier (more frequent) ones: llama.cpp merges the highest score.
    scores[tokens.length - 1] = [...p].length - i / (pieces.length + 1);
  });
  return { tokens, scores, types: Int32Array.from(types) };
}
