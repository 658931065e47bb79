/**
 * A small streaming RFC-4180 CSV parser (a character state machine).
 *
 * Accepts what the MMLU release actually contains: quoted fields with commas, doubled quotes and
 * embedded newlines; CRLF and LF record terminators mixed in one file; a literal CR inside a quoted
 * field (kept verbatim); no newline after the last record. Anything else that RFC 4180 forbids — a
 * quote inside an unquoted field, characters after a closing quote, an unterminated quote, a bare CR
 * outside quotes — is an error naming the file, line and column, never a silent mis-split.
 */

export class CsvError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly column: number,
    detail: string,
  ) {
    super(`${file}:${line}:${column}: ${detail}`);
    this.name = "CsvError";
  }
}

export interface CsvRecord {
  fields: string[];
  /** 1-based physical line on which the record starts (LF and CRLF each count as one line break). */
  line: number;
}

export interface CsvLimits {
  /** Largest single field, in UTF-16 code units: bounds memory on hostile input. */
  maxFieldChars: number;
  /** Most fields in one record. */
  maxFields: number;
  /**
   * Reject a quote inside an unquoted field (RFC 4180). Off by default because the official MMLU
   * release has one (`val/college_medicine_val.csv` line 6) and Python's csv/pandas, which every MMLU
   * harness uses, keep such a quote as a literal character; we do the same and record where.
   */
  strictQuotes: boolean;
}

const DEFAULT_LIMITS: CsvLimits = { maxFieldChars: 1 << 20, maxFields: 1024, strictQuotes: false };

enum State {
  /** At the start of a field (after a separator or at the start of a record). */
  FieldStart = 0,
  Unquoted = 1,
  Quoted = 2,
  /** Just saw a quote inside a quoted field: either a doubled quote or the closing quote. */
  QuoteInQuoted = 3,
  /** Saw CR outside quotes: only LF may follow. */
  AfterCr = 4,
}

const QUOTE = 34;
const COMMA = 44;
const CR = 13;
const LF = 10;

/**
 * Feed text with `push` (any chunking, even one character at a time), then call `end`. Each returns
 * the records completed so far. Blank lines (a record that is one empty field) are skipped, as
 * pandas does, so a trailing newline never produces an empty record.
 */
export class CsvParser {
  private state = State.FieldStart;
  private field = "";
  private fields: string[] = [];
  private line = 1;
  private column = 0;
  private recordLine = 1;
  /** Where the current quoted field opened, for an "unterminated quote" error. */
  private quoteLine = 1;
  private quoteColumn = 1;
  private ended = false;
  /** The current field was quoted, so `""` on its own line is a record, not a blank line. */
  private sawQuote = false;
  private readonly limits: CsvLimits;
  /** Positions of quotes kept literally inside unquoted fields (lenient mode). */
  readonly strayQuotes: { line: number; column: number }[] = [];

  constructor(
    readonly file: string,
    limits: Partial<CsvLimits> = {},
  ) {
    this.limits = { ...DEFAULT_LIMITS, ...limits };
  }

  push(chunk: string): CsvRecord[] {
    if (this.ended) throw new Error("CsvParser.push after end");
    const out: CsvRecord[] = [];
    // Runs of ordinary characters are appended with one slice instead of per character.
    let runStart = -1;
    const flushRun = (i: number) => {
      if (runStart >= 0) {
        this.append(chunk.slice(runStart, i));
        runStart = -1;
      }
    };
    for (let i = 0; i < chunk.length; i++) {
      const c = chunk.charCodeAt(i);
      this.column++;
      switch (this.state) {
        case State.FieldStart:
          if (c === QUOTE) {
            this.state = State.Quoted;
            this.sawQuote = true;
            this.quoteLine = this.line;
            this.quoteColumn = this.column;
          } else if (c === COMMA) {
            this.endField();
          } else if (c === LF) {
            this.endRecord(out);
            this.newLine();
          } else if (c === CR) {
            this.state = State.AfterCr;
          } else {
            this.state = State.Unquoted;
            runStart = i;
          }
          break;
        case State.Unquoted:
          if (c === COMMA) {
            flushRun(i);
            this.endField();
            this.state = State.FieldStart;
          } else if (c === LF) {
            flushRun(i);
            this.endRecord(out);
            this.newLine();
            this.state = State.FieldStart;
          } else if (c === CR) {
            flushRun(i);
            this.state = State.AfterCr;
          } else if (c === QUOTE) {
            if (this.limits.strictQuotes) {
              throw this.error(
                "a quote inside an unquoted field (quote the whole field and double the quote)",
              );
            }
            // Lenient (Python csv / pandas behaviour): the quote is a literal character.
            this.strayQuotes.push({ line: this.line, column: this.column });
            if (runStart < 0) runStart = i;
          } else if (runStart < 0) {
            runStart = i;
          }
          break;
        case State.Quoted:
          if (c === QUOTE) {
            flushRun(i);
            this.state = State.QuoteInQuoted;
          } else {
            // Newlines inside quotes belong to the field; count them for error positions.
            if (c === LF) {
              flushRun(i);
              this.append("\n");
              this.line++;
              this.column = 0;
            } else if (runStart < 0) runStart = i;
          }
          break;
        case State.QuoteInQuoted:
          if (c === QUOTE) {
            this.append('"');
            this.state = State.Quoted;
          } else if (c === COMMA) {
            this.endField();
            this.state = State.FieldStart;
          } else if (c === LF) {
            this.endRecord(out);
            this.newLine();
            this.state = State.FieldStart;
          } else if (c === CR) {
            this.state = State.AfterCr;
          } else {
            throw this.error("unexpected character after a closing quote (expected a comma or end of line)");
          }
          break;
        case State.AfterCr:
          if (c !== LF) throw this.error("a bare CR outside quotes (expected CRLF)");
          this.endRecord(out);
          this.newLine();
          this.state = State.FieldStart;
          break;
      }
    }
    flushRun(chunk.length);
    return out;
  }

  end(): CsvRecord[] {
    if (this.ended) return [];
    this.ended = true;
    const out: CsvRecord[] = [];
    switch (this.state) {
      case State.Quoted:
        throw new CsvError(
          this.file,
          this.quoteLine,
          this.quoteColumn,
          "unterminated quoted field (missing closing quote before end of file)",
        );
      case State.AfterCr:
        throw this.error("a bare CR at end of file (expected CRLF)");
      default:
        // No final newline: the last record still counts.
        this.endRecord(out);
    }
    return out;
  }

  private append(s: string): void {
    if (this.field.length + s.length > this.limits.maxFieldChars) {
      throw this.error(`field longer than ${this.limits.maxFieldChars} characters`);
    }
    this.field += s;
  }

  private endField(): void {
    if (this.fields.length >= this.limits.maxFields) {
      throw this.error(`more than ${this.limits.maxFields} fields in one record`);
    }
    this.fields.push(this.field);
    this.field = "";
    this.sawQuote = false;
  }

  private endRecord(out: CsvRecord[]): void {
    const blank = this.fields.length === 0 && this.field === "" && !this.sawQuote;
    if (!blank) {
      this.endField();
      out.push({ fields: this.fields, line: this.recordLine });
    }
    this.fields = [];
    this.field = "";
    this.sawQuote = false;
  }

  private newLine(): void {
    this.line++;
    this.column = 0;
    this.recordLine = this.line;
  }

  private error(detail: string): CsvError {
    return new CsvError(this.file, this.line, this.column, detail);
  }
}

/** Parses a whole document. `file` only labels errors. */
export function parseCsv(text: string, file = "<csv>", limits?: Partial<CsvLimits>): CsvRecord[] {
  const p = new CsvParser(file, limits);
  const records = p.push(text);
  for (const r of p.end()) records.push(r);
  return records;
}
