/**
 * Client deadlines across real processes (`x-prefixmesh-deadline-ms`): two `prefixmesh node`
 * processes on 127.0.0.1 with the time-scaled sim engine, each calibrated at start-up. A deadline no
 * node can meet is refused at once with 429 `deadline_unmeetable` and Retry-After; one that fits is
 * answered; a malformed one is a 400.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { modelOf } from "../api-client.js";
import { type SimNodes, startSimNodes } from "./sim-nodes.js";

let nodes: SimNodes;
let model: string;

beforeAll(async () => {
  nodes = await startSimNodes(["A", "B"]);
  model = await modelOf(nodes.api[0] as string);
}, 90_000);

afterAll(async () => {
  await nodes?.stop();
});

function complete(url: string, deadline: string | undefined, prompt: string): Promise<Response> {
  return fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(deadline === undefined ? {} : { "x-prefixmesh-deadline-ms": deadline }),
    },
    body: JSON.stringify({ model, prompt, max_tokens: 4 }),
  });
}

const prompt = (tag: string) => `${tag} ${Array.from({ length: 300 }, (_, i) => `word${i}`).join(" ")}`;

describe("client deadlines (2 processes)", () => {
  it("refuses at once a request no node can answer in time: 429 deadline_unmeetable with Retry-After", async () => {
    const t0 = performance.now();
    const res = await complete(nodes.api[0] as string, "1", prompt("refused"));
    const body = (await res.json()) as { error: { code: string; message: string; type: string } };
    expect(res.status).toBe(429);
    expect(body.error.code).toBe("deadline_unmeetable");
    expect(body.error.type).toBe("rate_limit_error");
    expect(body.error.message).toMatch(/^deadline: /);
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // Refused up front, not after waiting: far below any run of the engine at full scale.
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  it("answers a request whose deadline fits", async () => {
    const res = await complete(nodes.api[1] as string, "60000", prompt("fits"));
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { text: string }[] };
    expect(body.choices[0]?.text.length).toBeGreaterThan(0);
  });

  it("answers a malformed deadline 400 invalid_deadline", async () => {
    for (const bad of ["0", "-5", "1.5", "abc", "99999999"]) {
      const res = await complete(nodes.api[0] as string, bad, prompt("bad"));
      const body = (await res.json()) as { error: { code: string; param: string } };
      expect(res.status).toBe(400);
      expect(body.error.code).toBe("invalid_deadline");
      expect(body.error.param).toBe("x-prefixmesh-deadline-ms");
    }
  });
});
