/** Token helpers for the llama.cpp server's cache model: prefixes as the server compares them. */

/**
 * A token the node does not know (e.g. a generated token the stream did not show): it matches
 * nothing, not even another unknown token, so no prefix is ever predicted through it.
 */
export const UNKNOWN_TOKEN = 0xffff_ffff;

/** `server_tokens::get_common_prefix` for text: the length of the common prefix. */
export function lcp(a: Uint32Array, b: Uint32Array): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i] && a[i] !== UNKNOWN_TOKEN) i++;
  return i;
}

/** A C++ `float` quotient or product: the server compares its shares in single precision. */
export const f32: (x: number) => number = Math.fround;

/** The known prefix of a slot's tokens (up to the first unknown one). */
export function knownPrefix(t: Uint32Array): Uint32Array {
  const i = t.indexOf(UNKNOWN_TOKEN);
  return i < 0 ? t : t.subarray(0, i);
}
