/**
 * Client requests taken in and still tokenizing count against `--max-pending` and keep the node busy
 * for a cache reset: a test-double engine (the simulator's) holds each tokenize until the test lets it
 * go, so requests pile up in the intake. A request beyond the bound is refused 429 before any
 * tokenizing; `/tokenize` is taken in like a completion; every admission ends, whatever its request
 * became (served, refused, failed, its client gone).
 */
import { afterEach, expect, it } from "vitest";
import { EngineUnavailableError } from "../../src/engines/errors.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { waitFor } from "../e2e/helpers.js";
import { intakeOf, nodesStoppedAfterEach, soloNode, TestSimEngine } from "./helpers.js";

/** A tokenize held until the test lets it go (or fails it). */
interface Held {
  text: string;
  go: () => void;
  fail: (err: Error) => void;
}

/** The simulator's engine, its tokenize held once `hold` is set (not while the node starts). */
class HeldTokenizeEngine extends TestSimEngine {
  hold = false;
  readonly held: Held[] = [];
  override async tokenize(text: string) {
    if (this.hold)
      await new Promise<void>((go, fail) => {
        this.held.push({ text, go, fail });
      });
    return super.tokenize(text);
  }
  /** Lets every held tokenize go on. */
  releaseAll(): void {
    for (const h of this.held.splice(0)) h.go();
  }
}

interface Answer {
  status: number;
  body: string;
  retryAfter: string | null;
}

const keep = nodesStoppedAfterEach();
const engines: HeldTokenizeEngine[] = [];
// Before the nodes stop (after-hooks run last first): a test that failed leaves nothing held.
afterEach(() => {
  for (const e of engines.splice(0)) {
    e.hold = false;
    e.releaseAll();
  }
});

async function heldNode(extra: Record<string, unknown> = {}) {
  const engine = new HeldTokenizeEngine();
  engines.push(engine);
  const { node, model } = await soloNode(engine, { maxPending: "2", ...extra });
  keep(node);
  engine.hold = true;
  return { engine, node, model };
}

function post(node: NodeHandle, path: string, body: object, signal?: AbortSignal): Promise<Answer> {
  return fetch(`${node.apiUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  }).then(async (r) => ({
    status: r.status,
    body: await r.text(),
    retryAfter: r.headers.get("retry-after"),
  }));
}

function complete(node: NodeHandle, model: string, prompt: string, signal?: AbortSignal): Promise<Answer> {
  return post(node, "/v1/completions", { model, prompt, max_tokens: 2 }, signal);
}

/** `answer` once it settled, or `undefined` if `engine` took another tokenize first. */
async function refusedOrTokenized(engine: HeldTokenizeEngine, answer: Promise<Answer>, before: number) {
  let got: Answer | undefined;
  void answer.then((a) => {
    got = a;
  });
  await waitFor(() => got !== undefined || engine.held.length > before, 10_000, "an answer or a tokenize");
  return got;
}

function expectOverloaded(a: Answer | undefined): void {
  expect(a?.status, a?.body).toBe(429);
  const body = JSON.parse(a?.body ?? "{}") as { error: { type: string; message: string } };
  expect(body.error.type).toBe("rate_limit_error");
  expect(body.error.message).toContain("too many requests in flight");
  expect(Number(a?.retryAfter)).toBeGreaterThanOrEqual(1);
}

it("refuses a request beyond --max-pending with 429 before tokenizing it, while others tokenize", async () => {
  const { engine, node, model } = await heldNode();
  const first = [complete(node, model, "one"), complete(node, model, "two")];
  await waitFor(() => engine.held.length === 2, 10_000, "both requests to tokenize");
  expect(intakeOf(node)).toBe(2);
  // An operator sees why the node refuses though nothing waits for an answer yet.
  const view = (await (await fetch(`${node.apiUrl}/cluster`)).json()) as Record<string, number>;
  expect([view.inFlightClients, view.intakeClients]).toEqual([0, 2]);

  expectOverloaded(await refusedOrTokenized(engine, complete(node, model, "three"), 2));
  // A chat and /tokenize are taken in the same way, and refused the same way.
  const chat = post(node, "/v1/chat/completions", { model, messages: [{ role: "user", content: "hi" }] });
  expectOverloaded(await refusedOrTokenized(engine, chat, 2));
  expectOverloaded(await refusedOrTokenized(engine, post(node, "/tokenize", { prompt: "four" }), 2));
  expect(engine.held.map((h) => h.text)).toEqual(["one", "two"]);
  // The two completions refused count as overloaded, as one refused at submit does; /tokenize not.
  const metrics = await (await fetch(`${node.apiUrl}/metrics`)).text();
  expect(metrics).toMatch(/prefixmesh_requests_total\{outcome="overloaded",route="none"[^}]*\} 2\n/);

  engine.releaseAll();
  expect((await Promise.all(first)).map((a) => a.status)).toEqual([200, 200]);
  expect(intakeOf(node)).toBe(0);
}, 30_000);

it("counts a /tokenize in the intake against the bound, and answers it once let go", async () => {
  const { engine, node, model } = await heldNode();
  const tokenize = post(node, "/tokenize", { prompt: "a b c" });
  const completion = complete(node, model, "one");
  await waitFor(() => engine.held.length === 2, 10_000, "both requests to tokenize");
  expectOverloaded(await refusedOrTokenized(engine, complete(node, model, "three"), 2));
  engine.releaseAll();
  const t = await tokenize;
  expect(t.status, t.body).toBe(200);
  expect(JSON.parse(t.body)).toMatchObject({ count: 3 });
  expect((await completion).status).toBe(200);
  expect(intakeOf(node)).toBe(0);
}, 30_000);

it("refuses a cache reset (409) while a request is still tokenizing, and resets once it is served", async () => {
  const { engine, node, model } = await heldNode();
  const answer = complete(node, model, "one");
  await waitFor(() => engine.held.length === 1, 10_000, "the request to tokenize");
  const epoch = (node.runtime.clusterView() as { epoch: number }).epoch;
  await expect(node.runtime.resetCache()).rejects.toMatchObject({ status: 409 });
  engine.releaseAll();
  expect((await answer).status).toBe(200);
  await node.runtime.resetCache();
  expect((node.runtime.clusterView() as { epoch: number }).epoch).toBeGreaterThan(epoch);
}, 30_000);

it("ends every admission: after refusals, hang-ups and failures the node admits up to its bound again", async () => {
  const { engine, node, model } = await heldNode();
  // A client that hangs up while its prompt tokenizes, and one whose tokenize the engine fails.
  const gone = new AbortController();
  const hungUp = complete(node, model, "gone", gone.signal).catch((e: Error) => e);
  const failed = complete(node, model, "fails");
  await waitFor(() => engine.held.length === 2, 10_000, "both requests to tokenize");
  expectOverloaded(await refusedOrTokenized(engine, complete(node, model, "refused"), 2));
  gone.abort();
  expect(await hungUp).toBeInstanceOf(Error);
  const held = engine.held.splice(0);
  held.find((h) => h.text === "gone")?.go();
  held.find((h) => h.text === "fails")?.fail(new EngineUnavailableError("engine down", 502));
  expect((await failed).status).toBe(502);
  await waitFor(() => intakeOf(node) === 0, 10_000, "the hung-up request's admission to end");

  // Refused after tokenizing: max_tokens past the context, and a malformed deadline header.
  engine.hold = false;
  const tooLong = await post(node, "/v1/completions", { model, prompt: "x", max_tokens: 1_000_000 });
  expect(tooLong.status, tooLong.body).toBe(400);
  const badDeadline = await fetch(`${node.apiUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-prefixmesh-deadline-ms": "soon" },
    body: JSON.stringify({ model, prompt: "x", max_tokens: 1 }),
  });
  expect(badDeadline.status).toBe(400);
  const empty = await post(node, "/tokenize", { prompt: "   " });
  expect(empty.status, empty.body).toBe(200);
  expect(intakeOf(node)).toBe(0);

  engine.hold = true;
  const again = [complete(node, model, "again one"), complete(node, model, "again two")];
  await waitFor(() => engine.held.length === 2, 10_000, "two fresh requests to tokenize");
  engine.releaseAll();
  expect((await Promise.all(again)).map((a) => a.status)).toEqual([200, 200]);
  expect(intakeOf(node)).toBe(0);
}, 30_000);
