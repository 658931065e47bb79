/**
 * The KV-event mirror's prefix index: the blocks a prompt can reach, each under its parent by its
 * tokens, from the root (or a namespace's root) down. It answers the look-ups (`match`, `sequences`,
 * what is reachable); the mirror (mirror.ts) decides from the events which blocks are linked here.
 */
import type { Tokens } from "../../core/engine.js";
import { keyTokens, type NamespaceFields, namespaceOf } from "../../core/namespace.js";
import type { BlockHash } from "./wire-types.js";

export const ROOT = "";
/** A namespace's root: block hashes never start with NUL ("i:", "b:"), so it is no block's hash. */
export const nsRoot = (ns: string) => `\u0000${ns}`;
/** Whether a parent key is a namespace's root. */
export const isNsRoot = (parent: string) => parent.startsWith("\u0000");

export interface Block {
  hash: BlockHash;
  /** ROOT (or its namespace's root) for the first block of a sequence. */
  parent: string;
  tokens: Uint32Array;
  /** Index key of `tokens` under the parent. */
  key: string;
  copies: number;
  plain: boolean;
  /** A namespace root's first block: its namespace (indexes the root when linked). */
  ns?: NamespaceFields;
}

/**
 * Children of one parent, by their tokens' key (keys of different lengths never collide), plus the
 * distinct token counts present (usually one: the block size).
 */
interface ChildIndex {
  /** Distinct token counts, longest first. */
  lengths: number[];
  /** Keys present per token count. */
  perLength: Map<number, number>;
  byKey: Map<string, Block[]>;
}

export class BlockIndex {
  private readonly children = new Map<string, ChildIndex>();
  /** The namespace of each namespace root that has children. */
  private readonly roots = new Map<string, NamespaceFields>();
  /**
   * Hashes of the blocks a prompt can reach, and their count and tokens, kept as blocks are linked and
   * unlinked: a metrics scrape reads them without walking the index. A block's subtree is walked only
   * when it is attached to or detached from a root (an evicted leaf: itself alone).
   */
  private readonly reached = new Set<string>();
  private reachedTokens = 0;

  clear(): void {
    this.children.clear();
    this.roots.clear();
    this.reached.clear();
    this.reachedTokens = 0;
  }

  /** Longest prefix of `tokens` (of namespace `ns`) the engine holds as a chain of whole blocks, in tokens. */
  match(tokens: Tokens, ns: NamespaceFields = {}): number {
    const name = namespaceOf(ns);
    let at = name === undefined ? ROOT : nsRoot(name);
    let pos = 0;
    for (;;) {
      const index = this.children.get(at);
      if (!index) return pos;
      let next: Block | undefined;
      for (const len of index.lengths) {
        if (pos + len > tokens.length) continue;
        next = index.byKey.get(keyOf(tokens, pos, len))?.[0];
        if (next) break;
      }
      if (!next) return pos;
      pos += next.tokens.length;
      at = next.hash;
    }
  }

  /**
   * Every cached prefix a prompt can match, one sequence per reachable leaf: plain tokens for the
   * default namespace, `keyTokens` of the namespace for the others.
   */
  sequences(): Tokens[] {
    const out: Tokens[] = [];
    // Iterative: with one token per block (SGLang's default page size) chains are as deep as prompts.
    const path: Uint32Array[] = [];
    const stack: { block: Block; depth: number; length: number }[] = [];
    const pushChildren = (at: string, depth: number, length: number): boolean => {
      const index = this.children.get(at);
      if (!index) return false;
      for (const list of index.byKey.values()) stack.push({ block: list[0]!, depth, length });
      return true;
    };
    pushChildren(ROOT, 0, 0);
    this.walk(stack, path, pushChildren, out);
    for (const [root, ns] of this.roots) {
      const from = out.length;
      pushChildren(root, 0, 0);
      this.walk(stack, path, pushChildren, out);
      for (let i = from; i < out.length; i++) out[i] = keyTokens({ ...ns, tokens: out[i]! });
    }
    return out;
  }

  private walk(
    stack: { block: Block; depth: number; length: number }[],
    path: Uint32Array[],
    pushChildren: (at: string, depth: number, length: number) => boolean,
    out: Tokens[],
  ): void {
    while (stack.length > 0) {
      const { block, depth, length } = stack.pop()!;
      path.length = depth;
      path.push(block.tokens);
      const total = length + block.tokens.length;
      if (pushChildren(block.hash, depth + 1, total)) continue;
      const seq = new Uint32Array(total);
      let o = 0;
      for (const part of path) {
        seq.set(part, o);
        o += part.length;
      }
      out.push(seq);
    }
  }

  /** Blocks matchable by a prompt (of any namespace), and their tokens: kept counts, no walk. */
  reachable(): { blocks: number; tokens: number } {
    const blocks = this.reached.size;
    // Cheap invariant: a reachable block has at least one token, and none is counted below zero.
    if (this.reachedTokens < blocks) throw new Error("mirror: reachable counts went inconsistent");
    return { blocks, tokens: this.reachedTokens };
  }

  link(b: Block): void {
    if (b.ns && !this.roots.has(b.parent)) this.roots.set(b.parent, b.ns);
    let index = this.children.get(b.parent);
    if (!index) {
      index = { lengths: [], perLength: new Map(), byKey: new Map() };
      this.children.set(b.parent, index);
    }
    const list = index.byKey.get(b.key);
    if (list) list.push(b);
    else {
      if (this.opens(b.parent)) this.attach(b);
      index.byKey.set(b.key, [b]);
      const n = b.tokens.length;
      const had = index.perLength.get(n) ?? 0;
      index.perLength.set(n, had + 1);
      if (had === 0) index.lengths = [...index.perLength.keys()].sort((x, y) => y - x);
    }
  }

  /** Throws, changing nothing, when `b` was never linked. */
  unlink(b: Block): void {
    const index = this.children.get(b.parent);
    const list = index?.byKey.get(b.key);
    const i = list ? list.indexOf(b) : -1;
    if (!index || !list || i < 0) throw new Error(`mirror: block ${b.hash} was not indexed`);
    list.splice(i, 1);
    if (i === 0 && this.reached.has(b.hash)) {
      this.detach(b);
      // The same tokens stored under another hash take its place as the one a prompt reaches.
      if (list.length > 0) this.attach(list[0]!);
    }
    if (list.length > 0) return;
    index.byKey.delete(b.key);
    if (index.byKey.size === 0) {
      this.children.delete(b.parent);
      this.roots.delete(b.parent);
      return;
    }
    const n = b.tokens.length;
    const left = index.perLength.get(n)! - 1;
    if (left > 0) index.perLength.set(n, left);
    else {
      index.perLength.delete(n);
      index.lengths = index.lengths.filter((x) => x !== n);
    }
  }

  /** Whether a block linked under `parent` is reachable: a root's child, or a reachable block's. */
  private opens(parent: string): boolean {
    return parent === ROOT || isNsRoot(parent) || this.reached.has(parent);
  }

  /** `b` became reachable: so did the blocks linked below it (stored while it was not). */
  private attach(b: Block): void {
    this.walkFrom(b, (x) => {
      if (this.reached.has(x.hash)) return false;
      this.reached.add(x.hash);
      this.reachedTokens += x.tokens.length;
      return true;
    });
  }

  /** `b` is no longer reachable: nor are the blocks below it. */
  private detach(b: Block): void {
    this.walkFrom(b, (x) => {
      if (!this.reached.delete(x.hash)) return false;
      this.reachedTokens -= x.tokens.length;
      return true;
    });
  }

  /** Visits `b` and, below each block `visit` accepts, the first block of each key. */
  private walkFrom(b: Block, visit: (x: Block) => boolean): void {
    const stack = [b];
    while (stack.length > 0) {
      const x = stack.pop()!;
      if (!visit(x)) continue;
      const index = this.children.get(x.hash);
      if (index) for (const list of index.byKey.values()) stack.push(list[0]!);
    }
  }
}

/**
 * A token run as a map key: its bytes as UTF-16 code units (two per token), in one allocation. Index
 * and look-up build keys the same way, so byte order does not matter.
 */
export function keyOf(tokens: Uint32Array, from: number, len: number): string {
  const units = new Uint16Array(tokens.buffer, tokens.byteOffset + from * 4, len * 2);
  if (units.length <= KEY_CHUNK) return String.fromCharCode.apply(null, units as unknown as number[]);
  let s = "";
  for (let i = 0; i < units.length; i += KEY_CHUNK)
    s += String.fromCharCode.apply(null, units.subarray(i, i + KEY_CHUNK) as unknown as number[]);
  return s;
}
const KEY_CHUNK = 8192;

export function sameTokens(a: Uint32Array, b: Uint32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
