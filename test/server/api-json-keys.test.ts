/**
 * A JSON body holding a `__proto__` or `constructor.prototype` key is valid JSON: the client API reads
 * it with the key dropped (unknown fields are ignored anyway), never as "not valid JSON", and nothing
 * reaches an object's prototype.
 */
import { afterAll, describe, expect, it } from "vitest";
import { createApiApp } from "../../src/server/openai/api-app.js";

describe("client API JSON bodies with prototype keys", () => {
  const app = createApiApp(undefined);
  app.post("/echo", async (req) => {
    const body = req.body as Record<string, unknown>;
    return { keys: Object.keys(body), polluted: ({} as Record<string, unknown>).polluted ?? null };
  });
  app.post("/nested", async (req) => {
    const m = (req.body as { messages: Record<string, unknown>[] }).messages[0] ?? {};
    return { keys: Object.keys(m), plain: Object.getPrototypeOf(m) === Object.prototype };
  });
  afterAll(() => app.close());

  for (const [name, payload] of [
    ["__proto__", '{"model":"m","prompt":"a","__proto__":{"polluted":1}}'],
    ["constructor.prototype", '{"model":"m","prompt":"a","constructor":{"prototype":{"polluted":1}}}'],
  ] as const) {
    it(`reads a body with a ${name} key, without it`, async () => {
      const res = await app.inject({
        method: "POST",
        url: "/echo",
        headers: { "content-type": "application/json" },
        payload,
      });
      expect(res.statusCode).toBe(200);
      const got = res.json() as { keys: string[]; polluted: unknown };
      expect(got.keys).toEqual(["model", "prompt"]);
      expect(got.polluted).toBeNull();
    });
  }

  it("drops such keys at any depth, so no nested object reaches a prototype either", async () => {
    const msg = '{"role":"user","__proto__":{"polluted":1},"constructor":{"prototype":{"polluted":1}}}';
    const res = await app.inject({
      method: "POST",
      url: "/nested",
      headers: { "content-type": "application/json" },
      payload: `{"model":"m","messages":[${msg}]}`,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ keys: ["role"], plain: true });
  });

  it("still refuses a body that is no JSON, saying so", async () => {
    const res = await app.inject({
      method: "POST",
      url: "/echo",
      headers: { "content-type": "application/json" },
      payload: '{"model":',
    });
    expect(res.statusCode).toBe(400);
    expect(res.payload).toMatch(/not valid JSON/);
  });
});
