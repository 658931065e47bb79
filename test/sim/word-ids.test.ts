import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { wordIds } from "../../src/engines/sim/sim-engine.js";

/** The definition the one-pass tokenizer must match: FNV-1a of each `\s`-separated word, mod 100 000. */
function reference(text: string): number[] {
  return text
    .split(/\s+/)
    .filter((w) => w.length > 0)
    .map((w) => {
      let h = 0x811c9dc5;
      for (let k = 0; k < w.length; k++) h = Math.imul(h ^ w.charCodeAt(k), 0x01000193);
      return (h >>> 0) % 100_000;
    });
}

// Every character JavaScript's \s matches, and some that look like spaces but are not (U+180E, U+200B).
const spaces = [..."\t\n\v\f\r \u00a0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"];
const notSpaces = ["\u180e", "\u200b", "\u0085"];

describe("sim tokenizer (wordIds)", () => {
  it("matches split(/\\s+/) + FNV-1a on any text, Unicode whitespace included", () => {
    const char = fc.oneof(
      fc.constantFrom(...spaces, ...notSpaces),
      fc.string({ unit: "grapheme", minLength: 1, maxLength: 1 }),
      fc.constantFrom("a", "b", "é", "字"),
    );
    fc.assert(
      fc.property(fc.array(char, { maxLength: 200 }), (chars) => {
        const text = chars.join("");
        expect(Array.from(wordIds(text))).toEqual(reference(text));
      }),
      { numRuns: 2000 },
    );
  });

  it("returns its own array each time (the scratch buffer is never handed out)", () => {
    const a = wordIds("one two three");
    const b = wordIds("four five");
    expect(Array.from(a)).toEqual(reference("one two three"));
    expect(Array.from(b)).toEqual(reference("four five"));
    expect(Array.from(wordIds(""))).toEqual([]);
    expect(Array.from(wordIds("  \n "))).toEqual([]);
    const long = Array.from({ length: 5000 }, (_, i) => `w${i}`).join(" ");
    expect(Array.from(wordIds(long))).toEqual(reference(long));
  });
});
