/** The remote engine's local tokenizer (gpt-tokenizer): any client text tokenizes, none throws. */
import { describe, expect, it } from "vitest";
import { localTokens } from "../../src/engines/openai/tokenize.js";

describe("localTokens", () => {
  it("tokenizes special-token text as plain text instead of throwing", async () => {
    const text = "a<|endoftext|>b<|fim_prefix|>";
    const tokens = await localTokens(text);
    expect(tokens.length).toBeGreaterThan(4);
    // Plain text: the same ids as its pieces end to end would give where the pieces split cleanly.
    const pieces = [...(await localTokens("a<|endoftext|>")), ...(await localTokens("b<|fim_prefix|>"))];
    expect([...tokens]).toEqual(pieces);
    expect([...(await localTokens("Hello, world"))].length).toBeGreaterThan(0);
  });
});
