/** `prefixmesh sim --workload …-zipf / …-chat`: parameters checked with clear errors, and full runs. */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parseSimOptions, runSimCommand, type SimOptions } from "../../src/cli/sim.js";
import { SIM_DEFAULTS as defaults, quietErr, sink, usageError } from "./sim-cli-fixture.js";

const MMLU_DIR = resolve(__dirname, "../../../shared/datasets/mmlu");
const haveMmlu = existsSync(join(MMLU_DIR, "test"));
if (!haveMmlu)
  console.warn(`[skip] real-MMLU sim CLI runs: ${MMLU_DIR} is absent (the shared dataset folder)`);

describe("prefixmesh sim --workload *-zipf", () => {
  it("parses the exponent and --no-repeats", () => {
    const a = parseSimOptions({ ...defaults, workload: "synthetic-zipf", zipfS: "1.1" });
    expect(a.workload).toEqual({ name: "synthetic-zipf", skew: { kind: "zipf", s: 1.1, repeats: true } });
    const b = parseSimOptions({ ...defaults, workload: "mmlu-zipf", repeats: false });
    expect(b.workload.skew).toEqual({ kind: "zipf", s: 1, repeats: false });
    expect(parseSimOptions({ ...defaults, workload: "mmlu-skewed", repeats: false }).workload.skew).toEqual({
      kind: "hot-set",
      repeats: false,
    });
  });

  it("rejects bad exponents and flags the workload cannot use", () => {
    const bad: [Partial<SimOptions>, RegExp][] = [
      [{ workload: "synthetic-zipf", zipfS: "0" }, /--zipf-s must be > 0, got 0/],
      [{ workload: "synthetic-zipf", zipfS: "-1" }, /--zipf-s must be ≥ 0/],
      [{ workload: "synthetic-zipf", zipfS: "11" }, /--zipf-s must be ≤ 10/],
      [{ workload: "synthetic-zipf", zipfS: "steep" }, /--zipf-s must be a number/],
      [{ workload: "synthetic", zipfS: "1.1" }, /--zipf-s applies only to the Zipf workloads/],
      [{ workload: "mmlu-skewed", zipfS: "1.1" }, /--zipf-s applies only/],
      [{ workload: "mmlu", repeats: false }, /--no-repeats applies only to the skewed and Zipf/],
    ];
    for (const [o, re] of bad) expect(usageError(o).message, JSON.stringify(o)).toMatch(re);
  });

  it("runs end to end on the synthetic pool and names the schedule", async () => {
    const out = sink();
    const r = await runSimCommand(
      { ...defaults, workload: "synthetic-zipf", zipfS: "1.1", requests: "300" },
      { out: out.stream, err: quietErr() },
    );
    expect(r.totals.answered).toBe(300);
    expect(r.totals.incorrect).toBe(0);
    expect(out.text()).toMatch(/workload synthetic-zipf \(zipf\(s=1\.1\) with repeats\): 300 requests/);
  });

  it("a schedule the pool cannot hold is a usage error, not a crash", async () => {
    await expect(
      runSimCommand(
        { ...defaults, workload: "synthetic-zipf", repeats: false, requests: "20000" },
        { out: sink().stream, err: quietErr() },
      ),
    ).rejects.toThrow(/--workload synthetic-zipf: only 14042 distinct items exist/);
  });

  it.skipIf(!haveMmlu)("runs on real MMLU (mmlu-zipf --zipf-s 1.1)", async () => {
    const out = sink();
    const r = await runSimCommand(
      { ...defaults, workload: "mmlu-zipf", zipfS: "1.1", mmluDir: MMLU_DIR, requests: "300" },
      { out: out.stream, err: quietErr() },
    );
    expect(r.totals.answered).toBe(300);
    expect(r.workload.synthetic).toBe(false);
    expect(out.text()).toMatch(/workload mmlu-zipf \(zipf\(s=1\.1\) with repeats\)/);
  });
});

describe("prefixmesh sim --workload *-chat", () => {
  it("parses the chat parameters", () => {
    const a = parseSimOptions({
      ...defaults,
      workload: "synthetic-chat",
      conversations: "40",
      turns: "geo:4",
      chatStart: "system",
      chatEntry: "sticky",
      chatActive: "5",
    });
    expect(a.workload.chat).toEqual({
      conversations: 40,
      turns: { kind: "geometric", mean: 4 },
      start: "system",
      entry: "sticky",
      active: 5,
    });
    const b = parseSimOptions({ ...defaults, workload: "mmlu-chat", rate: "3", thinkMs: "1500" });
    expect(b.workload.chat).toMatchObject({
      conversations: 500,
      start: "few-shot",
      entry: "spread",
      thinkMs: 1500,
    });
    expect(b.rate).toBe(3);
  });

  it("rejects bad chat parameters, and chat flags on other workloads", () => {
    const chat = { workload: "synthetic-chat" };
    const bad: [Partial<SimOptions>, RegExp][] = [
      [{ ...chat, conversations: "0" }, /--conversations must be ≥ 1/],
      [{ ...chat, conversations: "1e9" }, /--conversations must be ≤ 100000/],
      [{ ...chat, conversations: "2.5" }, /--conversations must be a whole number/],
      [{ ...chat, turns: "0" }, /--turns: turns must be in \[1, 256\]/],
      [{ ...chat, turns: "9-3" }, /--turns: turns range must be MIN-MAX/],
      [{ ...chat, turns: "lots" }, /--turns: turns must look like N, MIN-MAX or geo:MEAN/],
      [{ ...chat, chatStart: "greeting" }, /--chat-start must be one of few-shot, system/],
      [{ ...chat, chatEntry: "random" }, /--chat-entry must be one of spread, sticky/],
      [{ ...chat, chatActive: "0" }, /--chat-active must be ≥ 1/],
      [{ ...chat, chatActive: "4", rate: "2" }, /--chat-active applies to the closed loop/],
      [{ ...chat, thinkMs: "100" }, /--think-ms applies to the open loop \(--rate\)/],
      [{ ...chat, rate: "2", thinkMs: "-1" }, /--think-ms must be ≥ 0/],
      [{ workload: "mmlu", turns: "4" }, /--turns applies only to the chat workloads/],
      [{ workload: "synthetic-zipf", conversations: "4" }, /--conversations applies only to the chat/],
      [{ ...chat, zipfS: "1.1" }, /--zipf-s applies only to the Zipf workloads/],
      [{ ...chat, repeats: false }, /--no-repeats applies only/],
    ];
    for (const [o, re] of bad) expect(usageError(o).message, JSON.stringify(o)).toMatch(re);
  });

  it("runs closed loop and prints the ideal and own-history bounds", async () => {
    const out = sink();
    const r = await runSimCommand(
      { ...defaults, workload: "synthetic-chat", conversations: "60", turns: "2-6" },
      { out: out.stream, err: quietErr() },
    );
    expect(r.totals.answered).toBe(r.totals.requests);
    expect(r.totals.incorrect).toBe(0);
    const text = out.text();
    expect(text).toMatch(
      /workload synthetic-chat \(chat: 60 conversations, turns uniform 2-6, .*closed loop\)/,
    );
    const m = /actual (\d+\.\d)%\s+ideal (\d+\.\d)%\s+own history (\d+\.\d)%/.exec(text);
    expect(m).not.toBeNull();
    expect(Number(m![2])).toBeGreaterThanOrEqual(Number(m![1]));
    expect(Number(m![2])).toBeGreaterThan(Number(m![3]));
  });

  it("runs open loop (--rate, --think-ms)", async () => {
    const out = sink();
    const r = await runSimCommand(
      { ...defaults, workload: "synthetic-chat", conversations: "60", rate: "4", thinkMs: "500" },
      { out: out.stream, err: quietErr() },
    );
    expect(r.totals.answered).toBe(r.totals.requests);
    expect(out.text()).toMatch(/open loop 4 requests\/s, think 500 ms/);
  });

  it.skipIf(!haveMmlu)("runs on real MMLU (mmlu-chat)", async () => {
    const out = sink();
    const r = await runSimCommand(
      { ...defaults, workload: "mmlu-chat", mmluDir: MMLU_DIR, conversations: "60", chatStart: "system" },
      { out: out.stream, err: quietErr() },
    );
    expect(r.totals.answered).toBe(r.totals.requests);
    expect(r.workload.synthetic).toBe(false);
    expect(out.text()).toMatch(/workload mmlu-chat \(chat: 60 conversations, .*system start/);
  });

  it("says where MMLU is missing for mmlu-chat too", async () => {
    await expect(
      runSimCommand(
        { ...defaults, workload: "mmlu-chat", mmluDir: "/nonexistent/mmlu" },
        { out: sink().stream, err: quietErr() },
      ),
    ).rejects.toThrow(/MMLU data not found at '\/nonexistent\/mmlu' .*use --workload synthetic-chat\)/);
  });
});
