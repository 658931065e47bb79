/**
 * The OpenAI-compatible API's other routes over a fake service (fake-service-api.ts): one model,
 * wrong methods and unknown paths, the dashboard's files under its CSP, and /tokenize.
 */
import { describe, expect, it } from "vitest";
import { fakeServiceApi } from "./fake-service-api.js";

describe("OpenAI-compatible API (fake service)", () => {
  const api = fakeServiceApi({ bodyLimit: 64 * 1024 });
  const { service } = api;

  it("retrieves one model as OpenAI's client does (GET /v1/models/{model}); an unknown one is 404", async () => {
    const m = await api.client.models.retrieve("fake-model");
    expect(m).toMatchObject({ id: "fake-model", object: "model", max_model_len: 256 });
    await expect(api.client.models.retrieve("nope")).rejects.toMatchObject({
      status: 404,
      code: "model_not_found",
    });
    // A model id with a slash (Hugging Face style), sent raw as some clients do.
    const r = await fetch(`${api.base}/v1/models/org/other`);
    expect(r.status).toBe(404);
    expect(((await r.json()) as { error: { message: string } }).error.message).toContain("'org/other'");
  });

  it("answers a known path asked with the wrong method 405 with Allow; an unknown path 404", async () => {
    const cases: [string, string, string][] = [
      ["POST", "/health", "GET, HEAD"],
      ["GET", "/v1/completions", "POST"],
      ["DELETE", "/v1/chat/completions?x=1", "POST"],
      ["PUT", "/v1/models/org/name", "GET, HEAD"],
      ["POST", "/dashboard/app.js", "GET, HEAD"],
    ];
    for (const [method, path, allow] of cases) {
      const r = await fetch(`${api.base}${path}`, { method });
      expect(r.status, `${method} ${path}`).toBe(405);
      expect(r.headers.get("allow"), path).toBe(allow);
      const body = (await r.json()) as { error: { type: string; message: string } };
      expect(body.error.type).toBe("invalid_request_error");
      expect(body.error.message).toContain(`allowed: ${allow}`);
    }
    const none = await fetch(`${api.base}/v2/completions`, { method: "POST" });
    expect(none.status).toBe(404);
    expect(none.headers.get("allow")).toBeNull();
  });

  it("serves the dashboard at / and /dashboard under a strict CSP, with uPlot from node_modules", async () => {
    for (const path of ["/", "/dashboard"]) {
      const r = await fetch(`${api.base}${path}`);
      expect(r.status).toBe(200);
      expect(r.headers.get("content-type")).toContain("text/html");
      const csp = r.headers.get("content-security-policy") ?? "";
      expect(csp).toContain("default-src 'none'");
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain("unsafe-inline");
      const html = await r.text();
      // No inline script or style: every script and sheet is a file of this origin.
      expect(html).not.toMatch(/<script>|<style|style=/);
      expect(html).toContain('src="/dashboard/uplot.js"');
    }
    const uplot = await fetch(`${api.base}/dashboard/uplot.js`);
    expect(uplot.status).toBe(200);
    expect(uplot.headers.get("content-type")).toContain("javascript");
    expect(await uplot.text()).toContain("uPlot");
    expect((await fetch(`${api.base}/dashboard/uplot.css`)).status).toBe(200);
    expect((await fetch(`${api.base}/dashboard/app.css`)).status).toBe(200);
    // The page's modules are dashboard files (served from the build; 503 when run unbuilt), never 404.
    for (const file of [
      "app.js",
      "dom.js",
      "charts.js",
      "series.js",
      "refused.js",
      "departed.js",
      "membership.js",
      "membership-view.js",
    ])
      expect((await fetch(`${api.base}/dashboard/${file}`)).status, file).not.toBe(404);
    const missing = await fetch(`${api.base}/dashboard/..%2F..%2Fpackage.json`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toContain(
      "no dashboard file",
    );
  });

  it("states the model's context and counts a text's tokens (vLLM's and llama.cpp's /tokenize shapes)", async () => {
    const models = (await (await fetch(`${api.base}/v1/models`)).json()) as {
      data: { max_model_len: number }[];
    };
    expect(models.data[0]?.max_model_len).toBe(service.maxContextTokens);
    const post = (body: unknown) =>
      fetch(`${api.base}/tokenize`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const vllm = await post({ model: "fake-model", prompt: "abcd" });
    expect(vllm.status).toBe(200);
    expect(await vllm.json()).toEqual({ tokens: [97, 98, 99, 100], count: 4, max_model_len: 256 });
    expect(await (await post({ content: "xy" })).json()).toMatchObject({ count: 2 });
    const neither = await post({ model: "fake-model" });
    expect(neither.status).toBe(400);
    expect(((await neither.json()) as { error: { param: string } }).error.param).toBe("prompt");
    expect((await post({ prompt: "a", content: "b" })).status).toBe(400);
    const wrongModel = await post({ model: "other", prompt: "a" });
    expect(wrongModel.status).toBe(404);
    expect(((await wrongModel.json()) as { error: { code: string } }).error.code).toBe("model_not_found");
    // Bounded like every request: the API's body limit (64 KiB in this test).
    expect((await post({ prompt: "x".repeat(70 * 1024) })).status).toBe(413);
  });
});
