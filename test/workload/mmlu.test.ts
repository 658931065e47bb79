import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allTestQuestions, loadMmlu, parseMmluCsv } from "../../src/workload/mmlu.js";
import { buildFewShotPrompts, formatSubject } from "../../src/workload/prompts.js";

const MMLU_DIR = resolve(__dirname, "../../../shared/datasets/mmlu");
const haveMmlu = existsSync(join(MMLU_DIR, "test"));
if (!haveMmlu) console.warn(`[skip] real-MMLU tests: ${MMLU_DIR} is absent (the shared dataset folder)`);

const row = (q: string, ans = "A") => `${q},a,b,c,d,${ans}\n`;

describe("MMLU loader on small fixtures", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "pm-mmlu-"));
    await mkdir(join(dir, "dev"));
    await mkdir(join(dir, "test"));
    await writeFile(
      join(dir, "dev", "toy_subject_dev.csv"),
      ["q1", "q2", "q3", "q4", "q5"].map((q) => row(q)).join(""),
    );
    await writeFile(
      join(dir, "test", "toy_subject_test.csv"),
      `"Which, of ""these""?\nSecond line",x,y,z,w,C\r\nplain,1,2,3,4,D`,
    );
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it("loads and validates rows", async () => {
    const ds = await loadMmlu(dir);
    expect(ds.subjects).toEqual(["toy_subject"]);
    const qs = allTestQuestions(ds);
    expect(qs).toHaveLength(2);
    expect(qs[0]).toMatchObject({
      question: 'Which, of "these"?\nSecond line',
      choices: ["x", "y", "z", "w"],
      answer: "C",
    });
    expect(qs[1]!.answer).toBe("D");
    expect(ds.val).toBeUndefined();
  });

  it("rejects a bad answer and a wrong column count, naming file and line", () => {
    expect(() => parseMmluCsv("ok,a,b,c,d,A\nbad,a,b,c,d,E\n", "f.csv", "s", "test")).toThrow(
      /f\.csv:2: answer must be one of A, B, C, D, got "E"/,
    );
    expect(() => parseMmluCsv('"multi\nline",a,b,c,d,A\nshort,a,b\n', "f.csv", "s", "test")).toThrow(
      /f\.csv:3: expected 6 columns .* got 3/,
    );
  });

  it("turns CSV syntax errors into loader errors naming the file", async () => {
    const bad = await mkdtemp(join(tmpdir(), "pm-mmlu-bad-"));
    try {
      await mkdir(join(bad, "dev"));
      await mkdir(join(bad, "test"));
      await writeFile(join(bad, "dev", "s_dev.csv"), row("a").repeat(5));
      await writeFile(join(bad, "test", "s_test.csv"), `${row("fine")}"unterminated,a,b,c,d,A\n`);
      await expect(loadMmlu(bad)).rejects.toThrow(/s_test\.csv:2:1: unterminated quoted field/);
      await writeFile(join(bad, "test", "s_test.csv"), row("fine"));
      await writeFile(join(bad, "dev", "s_dev.csv"), row("a").repeat(3));
      await expect(loadMmlu(bad)).rejects.toThrow(/s_dev\.csv: 3 rows, need 5 few-shot examples/);
      await rm(join(bad, "dev", "s_dev.csv"));
      await expect(loadMmlu(bad)).rejects.toThrow(/missing \(subject 's' has no dev file\)/);
    } finally {
      await rm(bad, { recursive: true, force: true });
    }
  });

  it("rejects an unknown subject and a missing folder", async () => {
    await expect(loadMmlu(dir, { subjects: ["nope"] })).rejects.toThrow(/unknown MMLU subject\(s\): nope/);
    await expect(loadMmlu(join(dir, "absent"))).rejects.toThrow(/cannot read MMLU test\/ folder/);
  });

  it("formats subjects exactly as hendrycks format_subject (leading space per word)", () => {
    expect(formatSubject("high_school_us_history")).toBe(" high school us history");
  });
});

describe.skipIf(!haveMmlu)("real MMLU (../shared/datasets/mmlu)", () => {
  it("has the published counts: 57 subjects, 14,042 test, 285 dev, 1,531 val rows", async () => {
    const ds = await loadMmlu(MMLU_DIR, { val: true });
    expect(ds.subjects).toHaveLength(57);
    const count = (m: Map<string, unknown[]>) => [...m.values()].reduce((a, v) => a + v.length, 0);
    expect(count(ds.test)).toBe(14_042);
    expect(count(ds.dev)).toBe(285);
    expect(count(ds.val!)).toBe(1_531);
  });

  it("builds the golden 5-shot prompt for abstract_algebra test question 0", async () => {
    const ds = await loadMmlu(MMLU_DIR, { subjects: ["abstract_algebra"] });
    const p = buildFewShotPrompts(ds)[0]!;
    const golden =
      "The following are multiple choice questions (with answers) about  abstract algebra.\n\n" +
      "Find all c in Z_3 such that Z_3[x]/(x^2 + c) is a field.\nA. 0\nB. 1\nC. 2\nD. 3\nAnswer: B\n\n" +
      "Statement 1 | If aH is an element of a factor group, then |aH| divides |a|. Statement 2 | If H and K are subgroups of G then HK is a subgroup of G.\nA. True, True\nB. False, False\nC. True, False\nD. False, True\nAnswer: B\n\n" +
      "Statement 1 | Every element of a group generates a cyclic subgroup of the group. Statement 2 | The symmetric group S_10 has 10 elements.\nA. True, True\nB. False, False\nC. True, False\nD. False, True\nAnswer: C\n\n" +
      "Statement 1| Every function from a finite set onto itself must be one to one. Statement 2 | Every subgroup of an abelian group is abelian.\nA. True, True\nB. False, False\nC. True, False\nD. False, True\nAnswer: A\n\n" +
      "Find the characteristic of the ring 2Z.\nA. 0\nB. 3\nC. 12\nD. 30\nAnswer: A\n\n" +
      "Find the degree for the given field extension Q(sqrt(2), sqrt(3), sqrt(18)) over Q.\nA. 0\nB. 4\nC. 2\nD. 6\nAnswer:";
    expect(p.prompt).toBe(golden);
    expect(p.id).toBe("abstract_algebra/0");
    expect(p.answer).toBe("B");
    expect(p.prompt).toBe(p.prefix + p.suffix);
  });

  it("keeps the literal CRLF inside a quoted dev field (college_mathematics dev row 2)", async () => {
    const ds = await loadMmlu(MMLU_DIR, { subjects: ["college_mathematics"] });
    expect(ds.dev.get("college_mathematics")![2]!.question).toContain("true?\r\nI. ");
  });
});

describe("option validation", () => {
  it("rejects bad options with a clear MmluError", async () => {
    const { mmluWorkload } = await import("../../src/workload/mmlu-workload.js");
    await expect(mmluWorkload({ dir: "x", seed: -1 })).rejects.toThrow(/invalid MMLU workload options: seed/);
    await expect(loadMmlu("x", { minDev: 500 })).rejects.toThrow(/invalid MMLU options: minDev/);
  });
});
