/**
 * A field that may take two shapes (a string or a list) and fits neither is told by what is wrong with
 * it, not zod's bare "Invalid input": a chat message with an image part, five stop sequences.
 */
import { describe, expect, it } from "vitest";
import {
  chatRequestSchema,
  completionRequestSchema,
  describeZodError,
} from "../../src/server/openai/schemas.js";

const chat = (content: unknown) =>
  chatRequestSchema.safeParse({ model: "m", messages: [{ role: "user", content }] });
const why = (r: { success: boolean; error?: unknown }) =>
  r.success ? undefined : describeZodError(r.error as Parameters<typeof describeZodError>[0]);

describe("a field of two shapes that fits neither", () => {
  it("says an image part is not text, naming the part", () => {
    const d = why(
      chat([
        { type: "text", text: "what is this?" },
        { type: "image_url", image_url: { url: "https://example.com/a.png" } },
      ]),
    );
    expect(d?.param).toBe("messages.0.content.1.type");
    expect(d?.message).toMatch(/only text content parts are supported/);
  });

  it("says how many stop sequences are allowed", () => {
    const r = completionRequestSchema.safeParse({ model: "m", prompt: "a", stop: ["a", "b", "c", "d", "e"] });
    const d = why(r);
    expect(d?.param).toBe("stop");
    expect(d?.message).toMatch(/<=4 items/);
  });

  it("says a content string is too long rather than that it is no list", () => {
    const d = why(chat("x".repeat(1_000_001)));
    expect(d?.param).toBe("messages.0.content");
    expect(d?.message).toMatch(/Too big/);
  });

  it("keeps a union's own message where it has one (token-array prompts)", () => {
    const d = why(completionRequestSchema.safeParse({ model: "m", prompt: [1, 2] }));
    expect(d?.message).toBe("prompt: prompt must be a string (token-array prompts are not supported)");
  });

  it("still takes text parts and strings", () => {
    expect(chat([{ type: "text", text: "hi" }]).success).toBe(true);
    expect(chat("hi").success).toBe(true);
  });
});
