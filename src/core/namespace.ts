/**
 * Cache namespaces: tenants (`cacheSalt`, vLLM's `cache_salt`) and LoRA adapters never share a cached
 * prefix. vLLM keeps them apart by mixing the salt (into the first block) and the adapter's name into
 * its block hashes; prefixmesh does the same one level lower: a namespaced request's CACHE KEY is its
 * tokens behind one whole block of pseudo-tokens derived from the namespace. Everything keyed by tokens
 * — the node's exact tree, the chained block keys (block-hash.ts), the peer index, snapshots, the
 * simulated engine's cache — then keeps namespaces apart with no code of its own, and a block boundary
 * stays a block boundary (real block k is key block k + 1).
 *
 * Pseudo-tokens have the top bit set; real token ids stay below 2^31 (`tokenIdsValid`, checked on
 * admission), so a request of another namespace cannot even share the first pseudo-token by accident
 * of its own tokens, and two namespaces share a cached prefix only if all 16 derived ids collide.
 * The default namespace (no salt, base model) has no pseudo-block: its keys are exactly the plain
 * tokens' keys, so everything that ran before namespaces existed is unchanged.
 */
import { BLOCK_SIZE, fmix } from "./block-hash.js";
import type { EngineRequest, Tokens } from "./engine.js";

/** Longest `cacheSalt` accepted (characters). */
export const MAX_CACHE_SALT = 256;
/** Longest adapter name accepted (characters), as a model name. */
export const MAX_ADAPTER_NAME = 256;
/** Largest real token id: the top bit belongs to namespace pseudo-tokens. */
export const MAX_TOKEN_ID = 0x7fffffff;
/** Pseudo-tokens in front of a namespaced request's cache key: one whole block. */
export const NAMESPACE_TOKENS = BLOCK_SIZE;

/** What names a request's namespace (both undefined: the default namespace). */
export type NamespaceFields = Pick<EngineRequest, "cacheSalt" | "adapter">;

/** The namespace's canonical name; undefined for the default one. Unambiguous: lengths are spelled out. */
export function namespaceOf(r: NamespaceFields): string | undefined {
  if (r.cacheSalt === undefined && r.adapter === undefined) return undefined;
  const a = r.adapter ?? "";
  const s = r.cacheSalt ?? "";
  return `${r.adapter === undefined ? "-" : a.length}:${a}|${r.cacheSalt === undefined ? "-" : s.length}:${s}`;
}

/** Pseudo-tokens a request's cache key carries before its tokens (0 or `NAMESPACE_TOKENS`). */
export function namespaceTokens(r: NamespaceFields): number {
  return r.cacheSalt === undefined && r.adapter === undefined ? 0 : NAMESPACE_TOKENS;
}

/** The namespace's pseudo-block: `NAMESPACE_TOKENS` ids ≥ 2^31, each an independent hash of `ns`. */
export function namespacePrefix(ns: string): Uint32Array {
  const out = new Uint32Array(NAMESPACE_TOKENS);
  for (let i = 0; i < NAMESPACE_TOKENS; i++) {
    let h = Math.imul(0x9e3779b1, i + 1) ^ ns.length;
    for (let k = 0; k < ns.length; k++) {
      h ^= ns.charCodeAt(k);
      h = Math.imul(h, 0x01000193);
    }
    out[i] = (fmix(h) | 0x80000000) >>> 0;
  }
  return out;
}

// Per request object: a request's key is asked for several times (route, run, estimate update).
const keys = new WeakMap<NamespaceFields & { tokens: Tokens }, Tokens>();

/**
 * The request's cache key: its tokens for the default namespace (the same array), else the
 * namespace's pseudo-block followed by its tokens. Matches against the key count the pseudo-block:
 * subtract `namespaceTokens` (at least 0) for the tokens actually reused.
 */
export function keyTokens(r: NamespaceFields & { tokens: Tokens }): Tokens {
  const ns = namespaceOf(r);
  if (ns === undefined) return r.tokens;
  let k = keys.get(r);
  if (k === undefined || k.length !== r.tokens.length + NAMESPACE_TOKENS) {
    k = new Uint32Array(NAMESPACE_TOKENS + r.tokens.length);
    k.set(namespacePrefix(ns));
    k.set(r.tokens, NAMESPACE_TOKENS);
    keys.set(r, k);
  }
  return k;
}

/** A match against a request's cache key as prompt tokens reused (the pseudo-block reuses none). */
export function promptMatch(r: NamespaceFields, keyMatch: number): number {
  return Math.max(0, keyMatch - namespaceTokens(r));
}

/** Every id is a real token id (< 2^31): pseudo-tokens cannot be forged from a prompt. */
export function tokenIdsValid(tokens: Tokens): boolean {
  for (let i = 0; i < tokens.length; i++) if ((tokens[i] as number) > MAX_TOKEN_ID) return false;
  return true;
}

/**
 * Why a request cannot be admitted (from a client or a peer), or undefined: an empty or too long
 * prompt, a forged pseudo-token, a salt or adapter name out of bounds.
 */
export function requestProblem(
  r: NamespaceFields & { tokens: Tokens },
  maxPromptTokens: number,
): string | undefined {
  if (r.tokens.length === 0) return "empty prompt";
  if (r.tokens.length > maxPromptTokens) return `prompt longer than ${maxPromptTokens} tokens`;
  if (!tokenIdsValid(r.tokens)) return `token id above ${MAX_TOKEN_ID}`;
  if (r.cacheSalt !== undefined && (typeof r.cacheSalt !== "string" || r.cacheSalt.length > MAX_CACHE_SALT))
    return `cache salt must be a string of at most ${MAX_CACHE_SALT} characters`;
  if (r.adapter !== undefined && (typeof r.adapter !== "string" || r.adapter.length > MAX_ADAPTER_NAME))
    return `adapter name must be a string of at most ${MAX_ADAPTER_NAME} characters`;
  return undefined;
}
