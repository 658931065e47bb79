import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { CsvError, CsvParser, parseCsv } from "../../src/workload/csv.js";

const fields = (text: string) => parseCsv(text, "t.csv").map((r) => r.fields);

describe("CSV parser (RFC 4180)", () => {
  it("parses plain records with LF and CRLF mixed, and no final newline", () => {
    expect(fields("a,b\r\nc,d\ne,f")).toEqual([
      ["a", "b"],
      ["c", "d"],
      ["e", "f"],
    ]);
  });

  it("handles quoted commas, doubled quotes and embedded newlines", () => {
    const text = '"x, y","say ""hi""","line1\nline2\r\nline3",plain\r\n';
    expect(fields(text)).toEqual([["x, y", 'say "hi"', "line1\nline2\r\nline3", "plain"]]);
  });

  it("keeps a literal CR inside quotes", () => {
    expect(fields('"a\rb",c\n')).toEqual([["a\rb", "c"]]);
  });

  it("keeps empty fields, including empty quoted ones, and skips blank lines", () => {
    expect(fields(',,\n\n"",x\n\r\n')).toEqual([
      ["", "", ""],
      ["", "x"],
    ]);
  });

  it("reports the line a multi-line record starts on", () => {
    const recs = parseCsv('a,"1\n2\n3",b\nnext,row', "t.csv");
    expect(recs.map((r) => r.line)).toEqual([1, 4]);
  });

  it("gives the same records whatever the chunking", () => {
    const text = '"q, 1","a ""b""\r\nc",x\r\nd,e\n"f\rg",h';
    const whole = fields(text);
    const p = new CsvParser("t.csv");
    const out = [];
    for (const ch of text) out.push(...p.push(ch));
    out.push(...p.end());
    expect(out.map((r) => r.fields)).toEqual(whole);
  });

  it("errors name file, line and column on malformed input", () => {
    expect(() => parseCsv('a,"b\nc', "bad.csv")).toThrow(/bad\.csv:1:3: unterminated quoted field/);
    expect(() => parseCsv('a,"b"x,c', "bad.csv")).toThrow(
      /bad\.csv:1:6: unexpected character after a closing quote/,
    );
    expect(() => parseCsv("a,b\rc", "bad.csv")).toThrow(/bad\.csv:1:5: a bare CR/);
    expect(() => parseCsv("ok\na,b\r", "bad.csv")).toThrow(/bad\.csv:2:4: a bare CR at end of file/);
    expect(() => parseCsv('ok\nab"c', "bad.csv", { strictQuotes: true })).toThrow(
      /bad\.csv:2:3: a quote inside/,
    );
    try {
      parseCsv('x\n"never closed', "f.csv");
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(CsvError);
      expect((e as CsvError).line).toBe(2);
    }
  });

  it("keeps a stray quote in an unquoted field as a literal by default (as pandas does)", () => {
    const p = new CsvParser("t.csv");
    const recs = [...p.push("Nietzsche's Truth?\",b\n"), ...p.end()];
    expect(recs[0]!.fields).toEqual(["Nietzsche's Truth?\"", "b"]);
    expect(p.strayQuotes).toEqual([{ line: 1, column: 19 }]);
  });

  it("bounds field size and field count", () => {
    expect(() => parseCsv("abcdef", "big.csv", { maxFieldChars: 3 })).toThrow(
      /big\.csv:1:\d+: field longer than 3/,
    );
    expect(() => parseCsv("a,b,c,d", "wide.csv", { maxFields: 3 })).toThrow(/more than 3 fields/);
  });

  it("round-trips any records written with RFC 4180 quoting (property)", () => {
    const field = fc.string({
      unit: fc.constantFrom("a", "b", ",", '"', "\n", "\r", " ", "é"),
      maxLength: 8,
    });
    const record = fc.array(field, { minLength: 1, maxLength: 5 });
    fc.assert(
      fc.property(
        fc.array(record, { minLength: 1, maxLength: 6 }),
        fc.array(fc.boolean()),
        (records, crlf) => {
          // A record that is one empty unquoted field would be a blank line; quote it.
          const enc = (f: string) => (/[",\r\n]/.test(f) || f === "" ? `"${f.replaceAll('"', '""')}"` : f);
          const text = records.map((r, i) => r.map(enc).join(",") + (crlf[i] ? "\r\n" : "\n")).join("");
          expect(fields(text)).toEqual(records);
          // And without the final newline.
          expect(fields(text.replace(/\r?\n$/, ""))).toEqual(records);
        },
      ),
      { numRuns: 1000 },
    );
  });
});
