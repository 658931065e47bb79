/**
 * Loader for the official MMLU CSV release (hendrycks/test `data/`): `dev/<subject>_dev.csv`,
 * `test/<subject>_test.csv`, optional `val/<subject>_val.csv`; no header; columns
 * question, A, B, C, D, answer. Every row is validated; a bad file is an error naming file and line.
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { CsvError, parseCsv } from "./csv.js";

export type MmluSplit = "dev" | "test" | "val";
export type MmluAnswer = "A" | "B" | "C" | "D";

export interface MmluQuestion {
  subject: string;
  split: MmluSplit;
  /** 0-based row within its file. */
  index: number;
  question: string;
  choices: [string, string, string, string];
  answer: MmluAnswer;
}

export interface MmluDataset {
  dir: string;
  /** Sorted subject names (file stems), the same set in every split loaded. */
  subjects: string[];
  dev: Map<string, MmluQuestion[]>;
  test: Map<string, MmluQuestion[]>;
  /** Present only when `val/` exists (it is optional) and was asked for. */
  val?: Map<string, MmluQuestion[]>;
}

export class MmluError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "MmluError";
  }
}

const OptionsSchema = z
  .object({
    /** Load `val/` too when it exists. */
    val: z.boolean().default(false),
    /** Restrict to these subjects (each must exist). */
    subjects: z.array(z.string().regex(/^[a-z0-9_]+$/)).optional(),
    /** Few-shot examples each subject needs in `dev/`. */
    minDev: z.number().int().min(0).max(100).default(5),
    /** Bound on any one file: the largest official file is 1.9 MB. */
    maxFileBytes: z
      .number()
      .int()
      .positive()
      .default(32 * 1024 * 1024),
  })
  .strict();
export type LoadMmluOptions = z.input<typeof OptionsSchema>;

const RowSchema = z.tuple([
  z.string(),
  z.string(),
  z.string(),
  z.string(),
  z.string(),
  z.enum(["A", "B", "C", "D"], { error: "answer must be one of A, B, C, D" }),
]);

/** Parses and validates one MMLU CSV document. `file` labels errors. */
export function parseMmluCsv(text: string, file: string, subject: string, split: MmluSplit): MmluQuestion[] {
  // A UTF-8 BOM would otherwise glue itself to the first question.
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const records = parseCsv(body, file, { maxFieldChars: 256 * 1024, maxFields: 64 });
  return records.map((rec, index) => {
    if (rec.fields.length !== 6) {
      throw new MmluError(
        `${file}:${rec.line}: expected 6 columns (question,A,B,C,D,answer), got ${rec.fields.length}`,
      );
    }
    const parsed = RowSchema.safeParse(rec.fields);
    if (!parsed.success) {
      const got = JSON.stringify(rec.fields[5]?.slice(0, 20));
      throw new MmluError(`${file}:${rec.line}: answer must be one of A, B, C, D, got ${got}`);
    }
    const [question, a, b, c, d, answer] = parsed.data;
    return { subject, split, index, question, choices: [a, b, c, d], answer };
  });
}

async function listSubjects(dir: string, split: MmluSplit): Promise<string[]> {
  const suffix = `_${split}.csv`;
  let names: string[];
  try {
    names = await readdir(join(dir, split));
  } catch (err) {
    throw new MmluError(`cannot read MMLU ${split}/ folder in ${dir}: ${(err as Error).message}`);
  }
  return names
    .filter((n) => n.endsWith(suffix))
    .map((n) => n.slice(0, -suffix.length))
    .sort();
}

async function loadSplit(
  dir: string,
  split: MmluSplit,
  subjects: string[],
  maxFileBytes: number,
): Promise<Map<string, MmluQuestion[]>> {
  const out = new Map<string, MmluQuestion[]>();
  await Promise.all(
    subjects.map(async (subject) => {
      const file = join(dir, split, `${subject}_${split}.csv`);
      let size: number;
      try {
        size = (await stat(file)).size;
      } catch {
        throw new MmluError(`${file}: missing (subject '${subject}' has no ${split} file)`);
      }
      if (size > maxFileBytes)
        throw new MmluError(`${file}: ${size} bytes exceeds the ${maxFileBytes}-byte limit`);
      const text = await readFile(file, "utf8");
      out.set(subject, parseMmluCsv(text, file, subject, split));
    }),
  );
  // Map in sorted subject order regardless of which read finished first.
  return new Map(subjects.map((s) => [s, out.get(s)!]));
}

/** Loads and validates the dataset under `dir` (the folder holding `dev/` and `test/`). */
export async function loadMmlu(dir: string, opts: LoadMmluOptions = {}): Promise<MmluDataset> {
  const parsed = OptionsSchema.safeParse(opts);
  if (!parsed.success) {
    throw new MmluError(
      `invalid MMLU options: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`,
    );
  }
  const o = parsed.data;
  const testSubjects = await listSubjects(dir, "test");
  if (testSubjects.length === 0) throw new MmluError(`no <subject>_test.csv files in ${join(dir, "test")}`);
  let subjects = testSubjects;
  if (o.subjects) {
    const known = new Set(testSubjects);
    const unknown = o.subjects.filter((s) => !known.has(s));
    if (unknown.length > 0) throw new MmluError(`unknown MMLU subject(s): ${unknown.join(", ")}`);
    subjects = [...new Set(o.subjects)].sort();
  }
  try {
    const [dev, test] = await Promise.all([
      loadSplit(dir, "dev", subjects, o.maxFileBytes),
      loadSplit(dir, "test", subjects, o.maxFileBytes),
    ]);
    for (const s of subjects) {
      const n = dev.get(s)!.length;
      if (n < o.minDev) {
        throw new MmluError(
          `${join(dir, "dev", `${s}_dev.csv`)}: ${n} rows, need ${o.minDev} few-shot examples`,
        );
      }
    }
    const ds: MmluDataset = { dir, subjects, dev, test };
    if (o.val) {
      const hasVal = await stat(join(dir, "val")).then(
        (s) => s.isDirectory(),
        () => false,
      );
      if (hasVal) ds.val = await loadSplit(dir, "val", subjects, o.maxFileBytes);
    }
    return ds;
  } catch (err) {
    // CSV syntax errors already name file:line:column; keep one error type for callers.
    if (err instanceof CsvError) throw new MmluError(err.message);
    throw err;
  }
}

/** Every test question in subject order, then file order. */
export function allTestQuestions(ds: MmluDataset): MmluQuestion[] {
  return ds.subjects.flatMap((s) => ds.test.get(s)!);
}
