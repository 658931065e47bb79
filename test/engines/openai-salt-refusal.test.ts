/**
 * A server that cannot keep tenants apart is refused `cache_salt` rather than made to share its
 * cache: Ollama (no such field; found by its `/api/version`) and llama-server without the slot mirror
 * (it ignores the field; found by its `/props`). A node fronting one answers `400
 * cache_salt_unsupported`. A server that may honour it (vLLM's shape) gets the field. Against test
 * doubles of each server's endpoints.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_JSON_BYTES } from "../../src/engines/http-client.js";
import { OpenAIEngine } from "../../src/engines/openai/engine.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { loopbackNodeSettings } from "../server/helpers.js";

/**
 * "gateway": a vLLM behind a proxy that answers the paths it lacks with a 500, not a 404; "bloated":
 * one answering them with a body past the client's JSON bound.
 */
type Kind = "ollama" | "llama-server" | "vllm" | "gateway" | "bloated";

/** A test double of `kind`'s endpoints the engine probes, and a streaming `/v1/completions`. */
async function serverDouble(
  kind: Kind,
  port = 0,
  healthy = true,
): Promise<{ url: string; server: Server; bodies: unknown[]; paths: string[] }> {
  const bodies: unknown[] = [];
  const paths: string[] = [];
  const server = createServer((req, res) => {
    paths.push(req.url ?? "");
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const json = (status: number, v: unknown) => {
        res.writeHead(status, { "content-type": "application/json" });
        res.end(JSON.stringify(v));
      };
      const path = req.url ?? "";
      if (path === "/api/version" && kind === "ollama") return json(200, { version: "0.5.7" });
      if (path === "/props" && kind === "llama-server")
        return json(200, { total_slots: 1, default_generation_settings: { n_ctx: 2048 } });
      // Unhealthy: the node's health check never gets to ask whether it keeps tenants apart.
      if (!healthy && (path === "/health" || path === "/v1/models")) return json(500, { error: "sick" });
      if (path === "/health") return json(200, { status: "ok" });
      if (kind === "bloated" && (path === "/api/version" || path === "/props"))
        return json(200, { version: "x".repeat(MAX_JSON_BYTES + 1) });
      if (path === "/v1/models") return json(200, { data: [{ id: "m" }] });
      if (path === "/v1/completions") {
        bodies.push(JSON.parse(body));
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(`data: ${JSON.stringify({ choices: [{ text: "x", finish_reason: "stop" }] })}\n\n`);
        return res.end("data: [DONE]\n\n");
      }
      json(kind === "gateway" ? 500 : 404, { error: "not found" });
    });
  });
  await new Promise<void>((r) => server.listen(port, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, bodies, paths };
}

const servers: Server[] = [];
const engines: OpenAIEngine[] = [];
const nodes: NodeHandle[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
  await Promise.all(engines.splice(0).map((e) => e.close()));
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});

async function engineAt(baseUrl: string): Promise<OpenAIEngine> {
  const engine = await OpenAIEngine.create(
    { baseUrl, model: "m", tokenizer: "local", cacheMirror: "lru", retries: 0 },
    () => {},
  );
  engines.push(engine);
  return engine;
}

async function engineFor(kind: Kind) {
  const d = await serverDouble(kind);
  servers.push(d.server);
  return { engine: await engineAt(d.url), bodies: d.bodies };
}

/** An engine whose server is down at its start: a port just freed, where a double may come up later. */
async function engineDownAtStart(): Promise<{ engine: OpenAIEngine; port: number }> {
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((r) => probe.close(() => r()));
  return { engine: await engineAt(`http://127.0.0.1:${port}`), port };
}

describe("cache_salt on servers that would ignore it", () => {
  it("refuses it on Ollama and on llama-server without the slot mirror, passes it to the others", async () => {
    const ollama = await engineFor("ollama");
    const llama = await engineFor("llama-server");
    const vllm = await engineFor("vllm");
    expect(ollama.engine.namespaceProblem({ cacheSalt: "t" })).toMatch(/Ollama/);
    expect(llama.engine.namespaceProblem({ cacheSalt: "t" })).toMatch(/llama-server/);
    expect(vllm.engine.namespaceProblem({ cacheSalt: "t" })).toBeUndefined();
    expect(llama.engine.namespaceProblem({ adapter: "sql-lora" })).toMatch(/base model/);
    expect(vllm.engine.namespaceProblem({ adapter: "sql-lora" })).toBeUndefined();
    // Adapters are models of their own on Ollama (each its own runner and cache): not refused.
    expect(ollama.engine.namespaceProblem({ adapter: "other-model" })).toBeUndefined();
    const r = { id: "r", tokens: Uint32Array.of(1, 2), prompt: "p", maxTokens: 1 };
    await expect(ollama.engine.run({ ...r, cacheSalt: "t" })).rejects.toThrow(/cache_salt/);
    expect(ollama.bodies).toHaveLength(0);
    await ollama.engine.run(r);
    await vllm.engine.run({ ...r, cacheSalt: "t" });
    expect(vllm.bodies[0]).toMatchObject({ cache_salt: "t" });
  });

  it("asks a server that was down at start again, before a salted run reaches it", async () => {
    const { engine, port } = await engineDownAtStart();
    const r = { id: "r", tokens: Uint32Array.of(1, 2), prompt: "p", maxTokens: 1, cacheSalt: "t" };
    // Still down: the run fails instead of going out unchecked.
    await expect(engine.run(r)).rejects.toThrow(/keeps tenants apart/);
    const d = await serverDouble("llama-server", port);
    servers.push(d.server);
    await expect(engine.run(r)).rejects.toThrow(/cache_salt is not supported.*llama-server/);
    expect(d.bodies).toHaveLength(0);
    expect(engine.namespaceProblem({ cacheSalt: "t" })).toMatch(/llama-server/);
    await engine.run({ ...r, cacheSalt: undefined });
    expect(d.bodies).toHaveLength(1);
  });

  it("learns it from the health check once the server is up", async () => {
    const { engine, port } = await engineDownAtStart();
    expect(engine.namespaceProblem({ cacheSalt: "t" })).toBeUndefined();
    const d = await serverDouble("ollama", port);
    servers.push(d.server);
    expect((await engine.health()).ok).toBe(true);
    // Refused at admission now (400), not only at the run.
    expect(engine.namespaceProblem({ cacheSalt: "t" })).toMatch(/Ollama/);
  });

  it("asks once for concurrent salted runs while the server's answer is pending", async () => {
    const { engine, port } = await engineDownAtStart();
    const d = await serverDouble("llama-server", port);
    servers.push(d.server);
    const r = { id: "r", tokens: Uint32Array.of(1, 2), prompt: "p", maxTokens: 1, cacheSalt: "t" };
    const runs = [1, 2, 3, 4].map((i) => engine.run({ ...r, id: `r${i}` }));
    for (const run of runs) await expect(run).rejects.toThrow(/cache_salt is not supported.*llama-server/);
    expect(d.paths.filter((p) => p === "/props")).toHaveLength(1);
    expect(d.bodies).toHaveLength(0);
  });

  it.each(["gateway", "bloated"] as const)(
    "serves salted runs on a %s server's probe answers",
    async (kind) => {
      const { engine, bodies } = await engineFor(kind);
      const r = { id: "r", tokens: Uint32Array.of(1, 2), prompt: "p", maxTokens: 1, cacheSalt: "t" };
      await engine.run(r);
      await engine.run({ ...r, id: "r2" });
      expect(bodies).toHaveLength(2);
      expect(bodies[0]).toMatchObject({ cache_salt: "t" });
    },
  );

  it("answers the first salted request as the later ones at a node whose server was down at start", async () => {
    const { port } = await engineDownAtStart();
    const settings = await loopbackNodeSettings({
      id: "D",
      engine: "openai",
      engineUrl: `http://127.0.0.1:${port}`,
      model: "m",
      calibrationMs: "0",
    });
    const node = await startNode(settings, { logger: pino({ level: "silent" }) });
    nodes.push(node);
    const d = await serverDouble("llama-server", port, false);
    servers.push(d.server);
    const post = () =>
      fetch(`${node.apiUrl}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", prompt: "Hello there", max_tokens: 1, cache_salt: "tenant-a" }),
      });
    // The first learns it at its run (the salt probe), the second at admission: told alike.
    const told: unknown[] = [];
    for (const _ of [1, 2]) {
      const r = await post();
      expect(r.status).toBe(400);
      told.push(await r.json());
    }
    expect(told[0]).toMatchObject({
      error: { code: "cache_salt_unsupported", type: "invalid_request_error" },
    });
    expect((told[0] as { error: { message: string } }).error.message).toMatch(
      /^cache_salt is not supported.*llama-server/,
    );
    expect(told[1]).toEqual(told[0]);
    expect(d.paths.filter((p) => p === "/props")).toHaveLength(1);
    expect(d.bodies).toHaveLength(0);
  });

  it("answers 400 cache_salt_unsupported at a node fronting Ollama, and serves the unsalted request", async () => {
    const d = await serverDouble("ollama");
    servers.push(d.server);
    const settings = await loopbackNodeSettings({
      id: "O",
      engine: "openai",
      engineUrl: d.url,
      model: "m",
      // The double records every body the server gets: no calibration runs among them.
      calibrationMs: "0",
    });
    const node = await startNode(settings, { logger: pino({ level: "silent" }) });
    nodes.push(node);
    const post = (extra: Record<string, unknown>) =>
      fetch(`${node.apiUrl}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", prompt: "Hello there", max_tokens: 1, ...extra }),
      });
    const refused = await post({ cache_salt: "tenant-a" });
    expect(refused.status).toBe(400);
    const body = (await refused.json()) as { error: { code: string; type: string; message: string } };
    expect(body.error.code).toBe("cache_salt_unsupported");
    expect(body.error.type).toBe("invalid_request_error");
    expect(body.error.message).toMatch(/Ollama/);
    expect(d.bodies).toHaveLength(0);
    const ok = await post({});
    expect(ok.status).toBe(200);
    expect(d.bodies).toHaveLength(1);
  });
});
