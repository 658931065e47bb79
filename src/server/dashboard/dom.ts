/// <reference lib="dom" />
/**
 * The dashboard's DOM helpers: built nodes with text, never HTML strings, so nothing a peer advertises
 * can inject markup.
 */

export const $ = (id: string) => document.getElementById(id) as HTMLElement;

export function el(tag: string, text?: string | null, cls?: string): HTMLElement {
  const e = document.createElement(tag);
  if (text != null) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}
