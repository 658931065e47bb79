/** Shared fixtures of the slot-mirror tests (llama-slots*.test.ts): the server modelled, token runs. */
import type { SlotServerConfig } from "../../src/engines/llama-slots/slot-mirror.js";

/** Two slots of a 4,096-token context, llama-server's defaults otherwise (RAM cache, idle-slot saves). */
export const SLOT_SERVER: SlotServerConfig = {
  slots: 2,
  similarity: 0.1,
  cacheRamMiB: 8192,
  cacheIdleSlots: true,
  kvUnified: false,
  totalContextTokens: 4096,
};

/** `n` consecutive token ids from `from`. */
export const range = (from: number, n: number) => Uint32Array.from({ length: n }, (_, i) => from + i);

/** The runs one after another. */
export const cat = (...parts: Uint32Array[]) => {
  const out = new Uint32Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
};

/** One slot as a llama-server test double's `GET /slots` shows it (the fields the mirror reads). */
export interface SlotJson {
  id: number;
  is_processing: boolean;
  id_task?: number;
  n_prompt_tokens?: number;
}
