/**
 * Cache namespaces (tenants' `cacheSalt`, LoRA adapters): never a match across namespaces in the exact
 * tree, the peer index or a snapshot, checked against a naive model; the default namespace keeps the
 * keys it always had; and the node routes and reports cached tokens per namespace.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BLOCK_SIZE, blockKeys } from "../../src/core/block-hash.js";
import {
  keyTokens,
  MAX_CACHE_SALT,
  NAMESPACE_TOKENS,
  namespaceOf,
  namespacePrefix,
  promptMatch,
  requestProblem,
} from "../../src/core/namespace.js";
import { PeerIndex } from "../../src/core/peer-index.js";
import { RadixTree } from "../../src/core/radix-tree.js";
import { decodeSnapshot, encodeSnapshot } from "../../src/core/snapshot-codec.js";
import { forwardsIn, Harness, prompt } from "./node-harness.js";

const req = (tokens: Uint32Array, cacheSalt?: string, adapter?: string) => ({
  id: "r",
  tokens,
  maxTokens: 1,
  ...(cacheSalt !== undefined ? { cacheSalt } : {}),
  ...(adapter !== undefined ? { adapter } : {}),
});

describe("namespaces: keys", () => {
  it("the default namespace's key is the prompt itself: today's block keys, unchanged", () => {
    const t = prompt(1, 1);
    const r = req(t);
    expect(keyTokens(r)).toBe(t);
    expect(blockKeys(keyTokens(r))).toEqual(blockKeys(t));
    expect(namespaceOf(r)).toBeUndefined();
    expect(promptMatch(r, 37)).toBe(37);
  });

  it("a namespace's key is one whole pseudo-block of ids ≥ 2^31 before the prompt", () => {
    const t = prompt(1, 1);
    const k = keyTokens(req(t, "tenant-a"));
    expect(k.length).toBe(t.length + NAMESPACE_TOKENS);
    expect(NAMESPACE_TOKENS).toBe(BLOCK_SIZE);
    for (let i = 0; i < NAMESPACE_TOKENS; i++) expect(k[i]).toBeGreaterThanOrEqual(2 ** 31);
    expect(Array.from(k.subarray(NAMESPACE_TOKENS))).toEqual(Array.from(t));
    // Deterministic across nodes (no randomness), distinct across namespaces.
    expect(namespacePrefix("s")).toEqual(namespacePrefix("s"));
    const names = [
      namespaceOf({ cacheSalt: "a" }),
      namespaceOf({ adapter: "a" }),
      namespaceOf({ cacheSalt: "a", adapter: "a" }),
      namespaceOf({ cacheSalt: "", adapter: "a" }),
      namespaceOf({ cacheSalt: "a|1:", adapter: "" }),
    ];
    expect(new Set(names).size).toBe(names.length);
    expect(promptMatch(req(t, "x"), 10)).toBe(0);
    expect(promptMatch(req(t, "x"), NAMESPACE_TOKENS + 32)).toBe(32);
  });

  it("refuses forged pseudo-tokens and out-of-bounds salts", () => {
    expect(requestProblem(req(Uint32Array.of(1, 2)), 100)).toBeUndefined();
    expect(requestProblem(req(Uint32Array.of(1, 2 ** 31)), 100)).toMatch(/token id/);
    expect(requestProblem(req(Uint32Array.of(1), "x".repeat(MAX_CACHE_SALT + 1)), 100)).toMatch(/salt/);
    expect(requestProblem(req(new Uint32Array(0)), 100)).toBe("empty prompt");
  });
});

/** Longest common prefix of `a` and any of `seen`. */
function naiveMatch(seen: readonly Uint32Array[], a: Uint32Array): number {
  let best = 0;
  for (const s of seen) {
    let i = 0;
    while (i < s.length && i < a.length && s[i] === a[i]) i++;
    best = Math.max(best, i);
  }
  return best;
}

describe("namespaces: property against a naive model", () => {
  // Few distinct tokens and namespaces: prompts of different namespaces share long prefixes often.
  const ns = fc.constantFrom<[string | undefined, string | undefined]>(
    [undefined, undefined],
    ["t1", undefined],
    ["t2", undefined],
    [undefined, "lora-a"],
    ["t1", "lora-a"],
  );
  const tokens = fc
    .array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 70 })
    .map((a) => Uint32Array.from(a));
  const op = fc.tuple(ns, tokens);

  it("tree, peer index and snapshot match only within the namespace, never across", () => {
    fc.assert(
      fc.property(
        fc.array(op, { minLength: 1, maxLength: 25 }),
        fc.array(op, { maxLength: 15 }),
        (ins, qs) => {
          const tree = new RadixTree({ capacity: 1_000_000 });
          const index = new PeerIndex();
          const seen = new Map<string, Uint32Array[]>();
          let clock = 0;
          for (const [[salt, adapter], t] of ins) {
            const r = req(t, salt, adapter);
            tree.insert(keyTokens(r), ++clock);
            index.updateTrieEstimate("opt", keyTokens(r));
            const name = namespaceOf(r) ?? "";
            seen.set(name, [...(seen.get(name) ?? []), t]);
          }
          // What a peer learns through the wire: the tree's keys, encoded and decoded.
          const snap = decodeSnapshot(
            encodeSnapshot({
              kind: "full",
              header: {
                sender: "N",
                epoch: 1,
                version: tree.version,
                tokenCount: tree.size,
                capacity: tree.capacity,
                queueDepth: 0,
                pushBackMs: 0,
              },
              body: tree.snapshotBody(),
            }),
          );
          if (snap.kind !== "full") throw new Error("expected a full snapshot");
          index.replaceEstimate("snap", snap.body);
          for (const [[salt, adapter], t] of [...qs, ...ins]) {
            const r = req(t, salt, adapter);
            const want = naiveMatch(seen.get(namespaceOf(r) ?? "") ?? [], t);
            expect(promptMatch(r, tree.match(keyTokens(r)))).toBe(want);
            const blocks = Math.floor(want / BLOCK_SIZE) * BLOCK_SIZE;
            expect(promptMatch(r, index.match("snap", keyTokens(r)))).toBe(blocks);
            expect(promptMatch(r, index.match("opt", keyTokens(r)))).toBe(blocks);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe("namespaces: the node", () => {
  it("two tenants with the same prompt reuse only their own earlier requests, locally and across a forward", () => {
    const h = new Harness(["A", "B"]);
    const t = prompt(3, 1);
    const run = (node: string, reqId: string, salt?: string) => {
      const eff = h.input(node, { type: "client-request", reqId, request: req(t, salt) });
      h.deliver();
      h.finishRuns();
      h.deliver();
      const r = h.repliesFor(reqId)[0];
      if (!r) throw new Error(`no reply to ${reqId}`);
      return { forwards: forwardsIn(eff), record: r.record };
    };
    // Tenant 1 warms B (peers do not know each other yet: served where it entered).
    const first = run("B", "t1-first", "tenant-1");
    expect(first.record.servedBy).toBe("B");
    expect(first.record.actualHitTokens).toBe(0);
    h.gossip(3);
    // Tenant 2, same prompt, at A: B's estimate holds nothing of tenant 2, so no forward, no hit.
    const other = run("A", "t2", "tenant-2");
    expect(other.forwards).toEqual([]);
    expect(other.record.predictedHitTokens).toBe(0);
    expect(other.record.actualHitTokens).toBe(0);
    h.gossip(3);
    // Tenant 1 again at A: forwarded to B, where its own earlier request is cached.
    const again = run("A", "t1-again", "tenant-1");
    expect(again.forwards).toEqual(["B"]);
    expect(again.record.servedBy).toBe("B");
    expect(again.record.predictedHitTokens).toBe(t.length);
    expect(again.record.actualHitTokens).toBe(t.length);
    // No salt (the default namespace) at B: B's tree holds two tenants' copies, none of them its.
    const plain = run("B", "plain");
    expect(plain.record.actualHitTokens).toBe(0);
  });
});
