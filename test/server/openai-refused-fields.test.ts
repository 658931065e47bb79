/**
 * Fields whose meaning no engine here honours are refused (400), not silently dropped: a client asking
 * for the best of several samples, a JSON answer or a function call would otherwise get plain text.
 */
import { describe, expect, it } from "vitest";
import {
  chatRequestSchema,
  completionRequestSchema,
  describeZodError,
} from "../../src/server/openai/schemas.js";

const completion = (extra: object) =>
  completionRequestSchema.safeParse({ model: "m", prompt: "hi", ...extra });
const chat = (extra: object) =>
  chatRequestSchema.safeParse({ model: "m", messages: [{ role: "user", content: "hi" }], ...extra });
const refusal = (r: ReturnType<typeof completion> | ReturnType<typeof chat>) =>
  r.success ? undefined : describeZodError(r.error);

describe("a body that is no JSON object", () => {
  it("says a JSON object is wanted, not zod's 'expected object, received string'", () => {
    for (const body of ["hello", ["a"], 3]) {
      const r = completionRequestSchema.safeParse(body);
      expect(r.success ? undefined : describeZodError(r.error)).toEqual({
        message: "the request body must be a JSON object (content-type: application/json)",
        param: null,
      });
    }
  });
});

describe("fields the node cannot honour", () => {
  it("refuses best_of above 1 on completions; 1 and null mean what the node does", () => {
    expect(refusal(completion({ best_of: 3 }))).toEqual({
      message: "best_of: only best_of=1 is supported",
      param: "best_of",
    });
    expect(completion({ best_of: 1 }).success).toBe(true);
    expect(completion({ best_of: null }).success).toBe(true);
  });

  it("refuses a JSON response_format on chat; text (the default) is served", () => {
    for (const type of ["json_object", "json_schema"]) {
      expect(refusal(chat({ response_format: { type } }))?.param).toBe("response_format.type");
    }
    expect(refusal(chat({ response_format: { type: "json_object" } }))?.message).toMatch(
      /only text responses are supported/,
    );
    expect(chat({ response_format: { type: "text" } }).success).toBe(true);
    expect(chat({ response_format: null }).success).toBe(true);
  });

  it("refuses legacy function calling on chat, as it refuses tools", () => {
    expect(refusal(chat({ functions: [{ name: "f", parameters: {} }] }))).toEqual({
      message: "functions: functions are not supported",
      param: "functions",
    });
    expect(refusal(chat({ tools: [{ type: "function", function: { name: "f" } }] }))?.param).toBe("tools");
  });

  it("refuses a non-empty logit_bias (token ids are one model's); an empty one or null is no bias", () => {
    for (const parse of [completion, chat]) {
      expect(refusal(parse({ logit_bias: { "50256": -100 } }))).toEqual({
        message: "logit_bias: logit_bias is not supported",
        param: "logit_bias",
      });
      expect(parse({ logit_bias: {} }).success).toBe(true);
      expect(parse({ logit_bias: null }).success).toBe(true);
    }
  });

  it("takes presence_penalty and frequency_penalty in OpenAI's range, -2 to 2", () => {
    for (const parse of [completion, chat]) {
      expect(parse({ presence_penalty: 1.5, frequency_penalty: -2 }).success).toBe(true);
      expect(refusal(parse({ presence_penalty: 2.5 }))?.param).toBe("presence_penalty");
      expect(refusal(parse({ frequency_penalty: -3 }))?.param).toBe("frequency_penalty");
    }
  });
});
