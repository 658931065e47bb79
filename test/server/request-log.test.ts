/**
 * The request log and the request id at one node's API (a test double of the node service): one line
 * per client request with its id, model, status, served-by, hops, cached tokens and duration; 4xx,
 * 5xx and rejected bodies included; successes sampled; `x-request-id` accepted, validated and returned.
 */
import { request } from "node:http";
import { connect } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyConnectionTimeouts } from "../../src/net/connection-timeouts.js";
import { buildApi } from "../../src/server/api.js";
import { createMetrics } from "../../src/server/metrics.js";
import { closeWithGrace } from "../../src/server/runtime/close-grace.js";
import { capture, FakeService, type Line } from "./request-log-doubles.js";

async function start(sample: number) {
  const service = new FakeService();
  const log = capture();
  const app = buildApi({
    service,
    metrics: createMetrics("A", { processMetrics: false }),
    logger: log.logger,
    bodyLimit: 1024,
    requestLogSample: sample,
  });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { app, url, service, lines: log.lines };
}

/** Generous: a close with no connection left open ends at once. */
const CLOSE_BOUND_MS = 15_000;

/**
 * Closes the API, failing if a connection still holds the close open past `CLOSE_BOUND_MS`: one a test
 * leaves behind would otherwise keep it waiting, silently, until its client gives up on it.
 */
async function closeApi(app: FastifyInstance): Promise<void> {
  const closed = app.close();
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<"late">((r) => {
    timer = setTimeout(() => r("late"), CLOSE_BOUND_MS);
  });
  const late = (await Promise.race([closed, bound])) === "late";
  clearTimeout(timer);
  if (!late) return;
  const open = await new Promise<number>((r) => app.server.getConnections((_err, n) => r(n)));
  app.server.closeAllConnections();
  await closed;
  throw new Error(`close still waited on ${open} connection(s) after ${CLOSE_BOUND_MS} ms`);
}

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

/** The request line with this id, once written (it is written when the response closes). */
async function lineFor(lines: Line[], id: string): Promise<Line> {
  // Generous: on a busy machine the response can close seconds after the client has its answer.
  const deadline = Date.now() + 15_000;
  for (;;) {
    const l = lines.find((x) => x.msg === "request" && x.requestId === id);
    if (l) return l;
    if (Date.now() > deadline) throw new Error(`no request line for ${id}: ${JSON.stringify(lines)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Writes `raw` on a new connection to `url`'s port; resolves to all the node answered once it closes. */
function rawExchange(url: string, raw: string): Promise<string> {
  const socket = connect(Number(new URL(url).port), "127.0.0.1");
  const answer = new Promise<string>((r) => {
    let got = "";
    socket.on("data", (d) => {
      got += d.toString();
    });
    socket.on("close", () => r(got));
  });
  socket.write(raw);
  return answer;
}

describe("request log and x-request-id (every request logged)", () => {
  let s: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    s = await start(1);
  });
  afterAll(() => closeApi(s.app));

  it("logs a served request with its id, model, status, served-by, hops, cached tokens, duration", async () => {
    const r = await post(
      s.url,
      { model: "m", prompt: "hello", max_tokens: 2 },
      { "x-request-id": "trace-1" },
    );
    expect(r.status).toBe(200);
    expect(r.headers.get("x-request-id")).toBe("trace-1");
    // The id travels with the request to the serving node (carried on forwards).
    expect(s.service.inputs.at(-1)?.requestId).toBe("trace-1");
    const l = await lineFor(s.lines, "trace-1");
    expect(l).toMatchObject({
      level: "info",
      method: "POST",
      path: "/v1/completions",
      status: 200,
      model: "m",
      stream: false,
      servedBy: "B",
      hops: 1,
      cachedTokens: 5,
      promptTokens: 5,
    });
    expect(typeof l.durationMs).toBe("number");
    expect(l.error).toBeUndefined();
  });

  it("makes an id when the client gives none, and returns it", async () => {
    const r = await post(s.url, { model: "m", prompt: "hello", max_tokens: 2, stream: true });
    expect(r.status).toBe(200);
    await r.text();
    const id = r.headers.get("x-request-id") as string;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(s.service.inputs.at(-1)?.requestId).toBe(id);
    expect(await lineFor(s.lines, id)).toMatchObject({ status: 200, stream: true, servedBy: "B" });
  });

  it("refuses an invalid x-request-id with 400, under an id of its own", async () => {
    for (const bad of ["has space", "x".repeat(129), 'quote"d']) {
      const r = await post(s.url, { model: "m", prompt: "hello" }, { "x-request-id": bad });
      expect(r.status).toBe(400);
      const body = (await r.json()) as { error: { code: string; param: string } };
      expect(body.error).toMatchObject({ code: "invalid_request_id", param: "x-request-id" });
      const id = r.headers.get("x-request-id") as string;
      expect(id).not.toBe(bad);
      expect(await lineFor(s.lines, id)).toMatchObject({ status: 400, error: "invalid_request_id" });
    }
  });

  it("logs 4xx refusals, rejected bodies and 5xx failures with their error code", async () => {
    const cases: [Promise<Response>, number, string][] = [
      [post(s.url, { model: "other", prompt: "hi" }), 404, "model_not_found"],
      [post(s.url, { model: "m", prompt: "y".repeat(100) }), 400, "context_length_exceeded"],
      [post(s.url, "{not json"), 400, "FST_ERR_CTP_INVALID_JSON_BODY"],
      [post(s.url, { model: "m", prompt: "z".repeat(2000) }), 413, "FST_ERR_CTP_BODY_TOO_LARGE"],
      [post(s.url, { model: "m", prompt: "fail now", max_tokens: 1 }), 502, "server_error"],
      [fetch(`${s.url}/nowhere`), 404, "not_found"],
    ];
    for (const [p, status, code] of cases) {
      const r = await p;
      expect(r.status, code).toBe(status);
      await r.text();
      const l = await lineFor(s.lines, r.headers.get("x-request-id") as string);
      expect(l, code).toMatchObject({ status, error: code, level: status >= 500 ? "warn" : "info" });
    }
  });

  it("leaves successful operations routes (probes, scrapes) out of the log", async () => {
    const r = await fetch(`${s.url}/health`, { headers: { "x-request-id": "probe-1" } });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-request-id")).toBe("probe-1");
    await post(s.url, { model: "m", prompt: "after" }, { "x-request-id": "after-probe" });
    await lineFor(s.lines, "after-probe");
    expect(s.lines.some((l) => l.requestId === "probe-1")).toBe(false);
  });
});

describe("request log: /ready while not ready", () => {
  let s: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    s = await start(1);
  });
  afterAll(() => closeApi(s.app));

  const probe = async (id: string, status: number) => {
    const r = await fetch(`${s.url}/ready`, { headers: { "x-request-id": id } });
    expect(r.status).toBe(status);
    await r.text();
  };

  it("logs a 503 at info when the state changes, repeats at debug, never at warn", async () => {
    s.service.readiness = { ok: false, detail: "starting" };
    await probe("r1", 503);
    await probe("r2", 503);
    await probe("r3", 503);
    s.service.readiness = { ok: false, detail: "engine: loading" };
    await probe("r4", 503);
    s.service.readiness = { ok: true };
    await probe("r5", 200);
    s.service.readiness = { ok: false, detail: "engine: loading" };
    await probe("r6", 503);
    const level = async (id: string) => (await lineFor(s.lines, id)).level;
    expect(await lineFor(s.lines, "r1")).toMatchObject({
      status: 503,
      error: "not_ready",
      errorMessage: "starting",
    });
    expect([await level("r1"), await level("r2"), await level("r3")]).toEqual(["info", "debug", "debug"]);
    expect(await level("r4")).toBe("info");
    expect(await level("r6")).toBe("info");
    expect(s.lines.some((l) => l.requestId === "r5")).toBe(false);
  });
});

describe("request log sampling", () => {
  let s: Awaited<ReturnType<typeof start>>;
  beforeAll(async () => {
    s = await start(0);
  });
  afterAll(() => closeApi(s.app));

  it("with a share of 0 logs no success but every refusal", async () => {
    const ok = await post(s.url, { model: "m", prompt: "hello" }, { "x-request-id": "ok-1" });
    expect(ok.status).toBe(200);
    const bad = await post(s.url, { model: "nope", prompt: "hello" }, { "x-request-id": "bad-1" });
    expect(bad.status).toBe(404);
    await lineFor(s.lines, "bad-1");
    expect(s.lines.some((l) => l.requestId === "ok-1")).toBe(false);
  });

  it("logs a client gone before any answer as 499, never sampled out", async () => {
    // node:http on a connection of its own, not fetch: once an abort destroys its socket, fetch's shared
    // pool dials a spare connection that sends nothing and keeps it for the node's advertised keep-alive.
    const req = request(`${s.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "gone-1" },
      agent: false,
    });
    let answered = false;
    req.on("response", () => {
      answered = true;
    });
    req.on("error", () => {});
    req.end(JSON.stringify({ model: "m", prompt: "hold on" }));
    const deadline = Date.now() + 15_000;
    while (!s.service.inputs.some((i) => i.prompt === "hold on") && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    req.destroy();
    const line = await lineFor(s.lines, "gone-1");
    s.service.release();
    expect(answered).toBe(false);
    expect(line).toMatchObject({ status: 499, clientGone: true, level: "info" });
  });
});

describe("request log: a response the server cuts before its headers", () => {
  it("says the 503 of a shutdown that drops the connection, not a client gone", async () => {
    const s = await start(1);
    const cut = post(s.url, { model: "m", prompt: "hold on" }, { "x-request-id": "cut-1" }).catch(
      () => "cut",
    );
    const deadline = Date.now() + 15_000;
    while (!s.service.inputs.some((i) => i.prompt === "hold on") && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    await closeWithGrace(s.app.server, s.app.close(), 50);
    expect(await cut).toBe("cut");
    const line = await lineFor(s.lines, "cut-1");
    s.service.release();
    expect(line).toMatchObject({ status: 503, level: "warn", serverCut: true });
    expect(line.clientGone).toBeUndefined();
  });

  it("says the 400 written for a body Node cannot parse, not a client gone", async () => {
    const s = await start(1);
    try {
      const answer = rawExchange(
        s.url,
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n" +
          "transfer-encoding: chunked\r\nx-request-id: cut-2\r\n\r\nzz\r\n",
      );
      expect(await answer).toMatch(/^HTTP\/1\.1 400/);
      const line = await lineFor(s.lines, "cut-2");
      expect(line).toMatchObject({ status: 400, serverCut: true });
      expect(line.clientGone).toBeUndefined();
    } finally {
      await closeApi(s.app);
    }
  });
});

describe("request log: a cut of a connection names only the request it refused", () => {
  it("keeps a garbage request's 400 off the request still waiting on its connection", async () => {
    const s = await start(1);
    try {
      const port = Number(new URL(s.url).port);
      const socket = connect(port, "127.0.0.1");
      const closed = new Promise<void>((r) => socket.on("close", () => r()));
      socket.on("data", () => {});
      const body = JSON.stringify({ model: "m", prompt: "hold pipelined" });
      socket.write(
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n" +
          `x-request-id: pipe-1\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      );
      const deadline = Date.now() + 15_000;
      while (!s.service.inputs.some((i) => i.prompt === "hold pipelined") && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 10));
      // The next request on the connection is malformed: Node's parser refuses it, the node cuts it.
      socket.write("GARBAGE\r\n\r\n");
      await closed;
      const line = await lineFor(s.lines, "pipe-1");
      s.service.release();
      // The 400 was meant for the garbage, which never reached a route; this request was answered nothing.
      expect(line.status).not.toBe(400);
      expect(line.serverCut).toBeUndefined();
    } finally {
      await closeApi(s.app);
    }
  });
});

describe("request log: a request whose body does not arrive in time", () => {
  it("says the 408 the node wrote before cutting it", async () => {
    const service = new FakeService();
    const log = capture();
    const app = buildApi({ service, metrics: createMetrics("A"), logger: log.logger, requestLogSample: 1 });
    applyConnectionTimeouts(app.server, {
      idleMs: 5_000,
      headersMs: 200,
      requestMs: 300,
      keepAliveMs: 5_000,
    });
    const url = await app.listen({ host: "127.0.0.1", port: 0 });
    try {
      // Headers in full, then a body that never completes.
      const answer = rawExchange(
        url,
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n" +
          'x-request-id: slow-1\r\ncontent-length: 100\r\n\r\n{"model":',
      );
      expect(await answer).toMatch(/^HTTP\/1\.1 408/);
      const line = await lineFor(log.lines, "slow-1");
      expect(line).toMatchObject({ status: 408, serverCut: true });
      expect(line.clientGone).toBeUndefined();
    } finally {
      await closeApi(app);
    }
  });
});

describe("request metrics", () => {
  it("count a completion refused as it is taken in (shutdown) as an error, as one refused later is", async () => {
    const s = await start(1);
    try {
      s.service.stopping = true;
      expect((await post(s.url, { model: "m", prompt: "late" })).status).toBe(503);
      const metrics = await (await fetch(`${s.url}/metrics`)).text();
      expect(metrics).toMatch(/prefixmesh_requests_total\{outcome="error",route="none"[^}]*\} 1\n/);
    } finally {
      await closeApi(s.app);
    }
  });
});
