/** The multi-turn chat workload: prefix chain, schedules, parameters, and (when present) real MMLU. */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import type { Tokens } from "../../src/core/engine.js";
import { CHAT_SYSTEM_PROMPT } from "../../src/workload/chat.js";
import { MAX_TURNS, meanTurns, parseTurns, type TurnDistribution } from "../../src/workload/chat-turns.js";
import { commonWords } from "../../src/workload/common-words.js";
import { historyHits, hitRate, idealHits } from "../../src/workload/ideal-hit.js";
import { loadMmluChatTopics, mmluChatWorkload } from "../../src/workload/mmlu-chat.js";
import { mmluWorkload } from "../../src/workload/mmlu-workload.js";
import { syntheticChat, syntheticChatTopics } from "../../src/workload/synthetic.js";
import { getEncoder } from "../../src/workload/tokenize.js";
import type { Workload } from "../../src/workload/types.js";

/** Prompt text: one common word per token id (what bench sends). */
const WORDS = commonWords();

const MMLU_DIR = resolve(__dirname, "../../../shared/datasets/mmlu");
const haveMmlu = existsSync(join(MMLU_DIR, "test"));
if (!haveMmlu) console.warn(`[skip] real-MMLU chat tests: ${MMLU_DIR} is absent (the shared dataset folder)`);

const startsWith = (a: Tokens, prefix: Tokens) =>
  prefix.length <= a.length && prefix.every((t, i) => a[i] === t);

/** Every follow-up's tokens (and text) start with the turn it follows, which is listed earlier. */
function expectPrefixChain(w: Workload): number {
  let followUps = 0;
  w.requests.forEach((r, i) => {
    if (!r.after) return;
    followUps++;
    const prev = w.requests[r.after.request]!;
    expect(r.after.request).toBeLessThan(i);
    expect(r.tokens.length).toBeGreaterThan(prev.tokens.length);
    expect(startsWith(r.tokens, prev.tokens), `${r.id} extends ${prev.id}`).toBe(true);
    if (r.prompt !== undefined) expect(r.prompt.startsWith(prev.prompt!), r.id).toBe(true);
  });
  return followUps;
}

/** Conversation index and turn (1-based) from a request id `c12.t3:…`. */
const turnOf = (id: string) => {
  const m = /^c(\d+)\.t(\d+):/.exec(id)!;
  return { c: Number(m[1]), t: Number(m[2]) };
};

const small = { seed: 1, scale: 0.2, conversations: 120, turns: parseTurns("2-8") };

describe("turn distributions", () => {
  it("parses N, MIN-MAX and geo:MEAN, and rejects the rest clearly", () => {
    expect(parseTurns("8")).toEqual({ kind: "fixed", turns: 8 });
    expect(parseTurns("2-8")).toEqual({ kind: "uniform", min: 2, max: 8 });
    expect(parseTurns("3-3")).toEqual({ kind: "fixed", turns: 3 });
    expect(parseTurns("geo:5")).toEqual({ kind: "geometric", mean: 5 });
    for (const bad of ["0", "257", "8-2", "0-4", "geo:0.5", "geo:65", "many", "2..8", "-3", "1.5"]) {
      expect(() => parseTurns(bad), bad).toThrow(/turns/);
    }
  });

  it("samples turns with the stated mean (geometric truncated at MAX_TURNS)", () => {
    for (const d of [parseTurns("2-8"), parseTurns("geo:6"), parseTurns("5")] as TurnDistribution[]) {
      const w = syntheticChat({ ...small, conversations: 4000, turns: d, scale: 1 });
      const perConv = w.requests.length / w.meta!.chat!.conversations;
      expect(w.meta!.chat!.conversations).toBe(4000);
      // sd of the mean of 4000 draws: < 0.1 for these distributions; 4 sd of slack.
      expect(Math.abs(perConv - meanTurns(d)), JSON.stringify(d)).toBeLessThan(0.4);
    }
    expect(meanTurns(parseTurns("geo:1"))).toBe(1);
    // Truncation at MAX_TURNS: Σ n·P(N = n) with the tail's mass on MAX_TURNS, summed directly.
    for (const mean of [3, 64]) {
      const q = 1 - 1 / mean;
      let direct = MAX_TURNS * q ** (MAX_TURNS - 1);
      for (let n = 1; n < MAX_TURNS; n++) direct += (n * q ** (n - 1)) / mean;
      expect(meanTurns(parseTurns(`geo:${mean}`))).toBeCloseTo(direct, 9);
    }
    expect(meanTurns(parseTurns("geo:64"))).toBeLessThan(64);
  });
});

describe("synthetic chat workload", () => {
  it("turn k+1's tokens and text start with turn k's, for every turn", () => {
    for (const start of ["few-shot", "system"] as const) {
      const w = syntheticChat({ ...small, start, text: WORDS });
      const followUps = expectPrefixChain(w);
      expect(followUps).toBe(w.requests.length - 120);
    }
  });

  it("opens each conversation with its topic's prefix (or the shared system prompt) and records answers", () => {
    const topics = syntheticChatTopics({ scale: 0.2 });
    const byGroup = new Map(topics.map((t) => [t.group, t]));
    const w = syntheticChat({ ...small });
    for (const r of w.requests) {
      const topic = byGroup.get(r.group)!;
      expect(startsWith(r.tokens, topic.start.tokens)).toBe(true);
      const { t } = turnOf(r.id);
      // start + t questions + (t - 1) two-token answers.
      const qid = r.id.slice(r.id.indexOf(":") + 1);
      const q = topic.questions.find((x) => x.id === qid)!;
      const tail = r.tokens.subarray(r.tokens.length - q.question.tokens.length);
      expect([...tail]).toEqual([...q.question.tokens]);
      if (t > 1) {
        const prev = w.requests[r.after!.request]!;
        const pq = prev.id.slice(prev.id.indexOf(":") + 1);
        const answer = topic.questions.find((x) => x.id === pq)!.answer.tokens;
        expect([...r.tokens.subarray(prev.tokens.length, prev.tokens.length + answer.length)]).toEqual([
          ...answer,
        ]);
      }
    }
    const sys = syntheticChat({ ...small, start: "system", text: WORDS });
    const first = sys.requests[0]!.tokens.subarray(0, 28);
    expect(sys.requests.every((r) => startsWith(r.tokens, first))).toBe(true);
    expect(sys.requests.every((r) => r.prompt!.startsWith(CHAT_SYSTEM_PROMPT))).toBe(true);
  });

  it("closed loop: conversations interleave, at most `active` in progress, turns in order", () => {
    const w = syntheticChat({ ...small, active: 8 });
    expect(w.arrival).toBe("closed-loop");
    const lastTurn = new Map<number, number>();
    const total = new Map<number, number>();
    for (const r of w.requests) {
      const { c } = turnOf(r.id);
      total.set(c, (total.get(c) ?? 0) + 1);
    }
    let inProgress = 0;
    let maxInProgress = 0;
    let switches = 0;
    w.requests.forEach((r, i) => {
      const { c, t } = turnOf(r.id);
      expect(t).toBe((lastTurn.get(c) ?? 0) + 1);
      if (t === 1) inProgress++;
      if (t === total.get(c)) inProgress--;
      maxInProgress = Math.max(maxInProgress, inProgress + (t === total.get(c) ? 1 : 0));
      lastTurn.set(c, t);
      if (i > 0 && turnOf(w.requests[i - 1]!.id).c !== c) switches++;
      expect(r.arrivalMs).toBeUndefined();
    });
    expect(maxInProgress).toBe(8);
    expect(switches).toBeGreaterThan(w.requests.length / 2);
    expect(w.meta!.schedule).toMatch(
      /^chat: 120 conversations, turns uniform 2-8, few-shot start, spread entry, 8 active, closed loop$/,
    );
  });

  it("is seeded", () => {
    const ids = (seed: number) => syntheticChat({ ...small, seed }).requests.map((r) => r.id);
    expect(ids(3)).toEqual(ids(3));
    expect(ids(4)).not.toEqual(ids(3));
  });

  it("open loop: Poisson conversation starts at rate / mean turns, follow-ups after think times", () => {
    const rate = 4;
    const w = syntheticChat({ ...small, conversations: 2000, scale: 1, openLoopRate: rate, thinkMs: 2000 });
    expect(w.arrival).toBe("open-loop");
    const firsts = w.requests.filter((r) => !r.after);
    expect(firsts).toHaveLength(2000);
    expect(firsts.every((r) => r.arrivalMs !== undefined)).toBe(true);
    const starts = firsts.map((r) => r.arrivalMs!);
    expect(starts.every((t, i) => i === 0 || t >= starts[i - 1]!)).toBe(true);
    // Conversations per second ≈ rate / mean turns (5): 2000 starts, sd of the rate estimate ≈ 2.2%.
    const convRate = 2000 / (starts[starts.length - 1]! / 1000);
    expect(Math.abs(convRate / (rate / 5) - 1)).toBeLessThan(0.1);
    const thinks = w.requests.filter((r) => r.after).map((r) => r.after!.thinkMs);
    expect(thinks.every((t) => t >= 0)).toBe(true);
    const meanThink = thinks.reduce((a, b) => a + b, 0) / thinks.length;
    expect(Math.abs(meanThink / 2000 - 1)).toBeLessThan(0.05);
    expect(w.requests.filter((r) => r.after).every((r) => r.arrivalMs === undefined)).toBe(true);
    expectPrefixChain(w);
  });

  it("sticky entry keeps a conversation on one entry node; spread leaves it to the runner", () => {
    const sticky = syntheticChat({ ...small, entry: "sticky", nodes: 4 });
    const entryOf = new Map<number, number>();
    for (const r of sticky.requests) {
      const { c } = turnOf(r.id);
      expect(r.entry).toBe(entryOf.get(c) ?? r.entry);
      entryOf.set(c, r.entry!);
    }
    expect(new Set(entryOf.values()).size).toBe(4);
    expect(syntheticChat(small).requests.every((r) => r.entry === undefined)).toBe(true);
  });

  it("--requests keeps a prefix of the schedule, still a valid chain", () => {
    const w = syntheticChat({ ...small, requests: 50 });
    expect(w.requests).toHaveLength(50);
    expectPrefixChain(w);
  });

  it("rejects bad parameters and workloads too large to hold", () => {
    expect(() => syntheticChat({ ...small, conversations: 0 })).toThrow(/conversations must be an integer/);
    expect(() => syntheticChat({ ...small, conversations: 1.5 })).toThrow(/conversations/);
    expect(() => syntheticChat({ ...small, active: 0 })).toThrow(/active conversations/);
    expect(() => syntheticChat({ ...small, openLoopRate: 0 })).toThrow(/rate must be > 0/);
    expect(() => syntheticChat({ ...small, openLoopRate: 1, thinkMs: -5 })).toThrow(/think time/);
    expect(() =>
      syntheticChat({ ...small, conversations: 100_000, turns: parseTurns(String(MAX_TURNS)) }),
    ).toThrow(/more than \d+ tokens in all/);
  });

  it("ideal hits: at least the own history for every turn; the bound respects the sending order", () => {
    const w = syntheticChat(small);
    const ideal = idealHits(w.requests);
    const hist = historyHits(w.requests);
    w.requests.forEach((r, i) => {
      expect(ideal[i]).toBeGreaterThanOrEqual(hist[i]!);
      if (r.after) expect(hist[i]).toBe(w.requests[r.after.request]!.tokens.length);
      else expect(hist[i]).toBe(0);
    });
    expect(hitRate(w.requests, ideal)).toBeGreaterThan(hitRate(w.requests, hist));
    // Brute force over a reversed sending order: the longest prefix shared with any request sent before.
    const reqs = w.requests.slice(0, 120);
    const order = reqs.map((_, i) => reqs.length - 1 - i);
    const fast = idealHits(reqs, order);
    order.forEach((i, k) => {
      let best = 0;
      for (const j of order.slice(0, k)) {
        const o = reqs[j]!.tokens;
        let n = 0;
        while (n < o.length && n < reqs[i]!.tokens.length && o[n] === reqs[i]!.tokens[n]) n++;
        best = Math.max(best, n);
      }
      expect(fast[i]).toBe(best);
    });
    expect(() => idealHits(reqs, [0, 0, ...order.slice(2)])).toThrow(/permutation/);
  });
});

describe.skipIf(!haveMmlu)("MMLU chat workload (../shared/datasets/mmlu)", () => {
  const opts = { dir: MMLU_DIR, seed: 1, conversations: 200, turns: parseTurns("2-8") };

  it("turn k+1's tokens and text start with turn k's, for every turn, with either start", async () => {
    for (const start of ["few-shot", "system"] as const) {
      const w = await mmluChatWorkload({ ...opts, start });
      expect(w.synthetic).toBe(false);
      expect(expectPrefixChain(w)).toBe(w.requests.length - 200);
      for (const r of w.requests) expect(r.prompt!.endsWith("\nAnswer:")).toBe(true);
    }
  });

  it("the history records the correct letter in the few-shot format, and turn 1 is the paper's 5-shot prompt", async () => {
    const w = await mmluChatWorkload(opts);
    const pool = await mmluWorkload({ dir: MMLU_DIR, seed: 1 });
    const byId = new Map(pool.requests.map((r) => [r.id.slice(r.id.indexOf(":") + 1), r]));
    for (const r of w.requests) {
      if (r.after) {
        const prev = w.requests[r.after.request]!;
        expect(r.prompt!.slice(prev.prompt!.length)).toMatch(/^ [ABCD]\n\n/);
      } else {
        const same = byId.get(r.id.slice(r.id.indexOf(":") + 1))!;
        expect(r.prompt).toBe(same.prompt);
        expect([...r.tokens]).toEqual([...same.tokens]);
      }
    }
  });

  it("segment-wise tokens equal tokenizing each turn's text whole (sampled conversations, every turn)", async () => {
    const encode = await getEncoder();
    for (const start of ["few-shot", "system"] as const) {
      const w = await mmluChatWorkload({ ...opts, conversations: 40, start });
      for (const r of w.requests) expect([...r.tokens], r.id).toEqual(encode(r.prompt!));
    }
  });

  it("…and for every question whose split the pre-tokenizer argument does not cover", async () => {
    // Questions not starting with a letter or digit (a space, a quote, "_", …): that the split after
    // "\n\n" is exact does not follow from the pre-tokenizer's rules (tokenize.ts, splitIsExact),
    // so check each such question after a start and after an answer.
    const encode = await getEncoder();
    const topics = await loadMmluChatTopics(MMLU_DIR);
    let checked = 0;
    for (const t of topics) {
      t.questions.forEach((q, i) => {
        const text = q.question.text!;
        if (/^[\p{L}\p{N}]/u.test(text)) return;
        checked++;
        expect(encode(t.start.text! + text), q.id).toEqual([...t.start.tokens, ...q.question.tokens]);
        const before = t.questions[(i + 1) % t.questions.length]!;
        expect(encode(before.question.text! + before.answer.text! + text), q.id).toEqual([
          ...before.question.tokens,
          ...before.answer.tokens,
          ...q.question.tokens,
        ]);
      });
    }
    expect(checked).toBeGreaterThan(100);
  });
});
