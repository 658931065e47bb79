/**
 * An engine whose tokenize (or chat template) never answers — a remote server's /tokenize that hangs:
 * the step is bounded by `--tokenize-timeout-ms`, the client gets a 504 saying so, and the step still
 * counts against `--max-pending` only until the engine ends it. The test double engine settles a step
 * only when the test fails it (as a remote engine's own HTTP timeout would).
 */
import { expect, it } from "vitest";
import type { ChatMessage, Tokens } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { AbortOnlyDouble } from "./abort-only-double.js";
import { intakeOf, nodesStoppedAfterEach, soloNode, TestSimEngine } from "./helpers.js";

/** The simulator's engine whose tokenize, or chat template, never answers once `hang` is set. */
class NeverAnsweringDouble extends TestSimEngine {
  hang: "tokenize" | "template" | undefined;
  /** Tokenizes held unanswered; `fail` ends them, as a remote engine's own HTTP timeout would. */
  readonly hung: ((err: Error) => void)[] = [];
  override async tokenize(text: string): Promise<Tokens> {
    if (this.hang === "tokenize") return new Promise<Tokens>((_go, fail) => this.hung.push(fail));
    return super.tokenize(text);
  }
  fail(): void {
    for (const f of this.hung.splice(0)) f(new Error("the engine's own timeout"));
  }
  override async applyChatTemplate(messages: ChatMessage[]): Promise<string> {
    if (this.hang === "template") return new Promise<string>((_go, fail) => this.hung.push(fail));
    return super.applyChatTemplate(messages);
  }
}

const keep = nodesStoppedAfterEach();

/** Waits, with a generous deadline, until `ok` holds. */
async function until(ok: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!ok() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
}

/** Ends the engine's hung steps, and waits until the node no longer counts them as overdue. */
async function endHung(engine: NeverAnsweringDouble, node: NodeHandle): Promise<void> {
  engine.fail();
  const deadline = Date.now() + 10_000;
  while (overdueOf(node) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(overdueOf(node)).toBe(0);
}

function overdueOf(node: NodeHandle): number {
  return (node.runtime as unknown as { steps: { overdue: number } }).steps.overdue;
}

async function post(node: NodeHandle, path: string, body: object) {
  const r = await fetch(`${node.apiUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.text() };
}

function expectTimedOut(a: { status: number; body: string }, step: string): void {
  expect(a.status, a.body).toBe(504);
  const { error } = JSON.parse(a.body) as { error: { type: string; message: string } };
  expect(error.type).toBe("server_error");
  expect(error.message).toContain(step);
  expect(error.message).toContain("--tokenize-timeout-ms");
}

it("answers 504 when the engine's tokenize or template never returns, and frees the slot", async () => {
  const engine = new NeverAnsweringDouble();
  const { node, model } = await soloNode(engine, { maxPending: "1", tokenizeTimeoutMs: "300" });
  keep(node);
  const completion = { model, prompt: "a question", max_tokens: 2 };
  engine.hang = "tokenize";
  expectTimedOut(await post(node, "/v1/completions", completion), "tokenize");
  // The engine's call ends by its own timeout (its place under --max-pending with it).
  await endHung(engine, node);
  expectTimedOut(await post(node, "/tokenize", { prompt: "a b" }), "tokenize");
  await endHung(engine, node);
  engine.hang = "template";
  const chat = { model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
  expectTimedOut(await post(node, "/v1/chat/completions", chat), "chat template");
  await endHung(engine, node);
  // With --max-pending 1, a slot still held would refuse this with 429.
  expect(intakeOf(node)).toBe(0);
  engine.hang = undefined;
  const served = await post(node, "/v1/completions", completion);
  expect(served.status, served.body).toBe(200);
}, 30_000);

it("aborts the engine's call at the 504, and frees its place once the call has ended", async () => {
  const engine = new AbortOnlyDouble();
  const { node, model } = await soloNode(engine, { maxPending: "1", tokenizeTimeoutMs: "300" });
  keep(node);
  const completion = { model, prompt: "a question", max_tokens: 2 };
  engine.hang = "tokenize";
  expectTimedOut(await post(node, "/v1/completions", completion), "tokenize");
  await until(() => engine.aborted === 1 && overdueOf(node) === 0);
  expect(engine.aborted).toBe(1);
  expect(overdueOf(node)).toBe(0);
  engine.hang = "template";
  const chat = { model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
  expectTimedOut(await post(node, "/v1/chat/completions", chat), "chat template");
  await until(() => engine.aborted === 2 && overdueOf(node) === 0);
  expect(engine.aborted).toBe(2);
  // With --max-pending 1, a place still held by an overdue step would refuse this with 429.
  engine.hang = undefined;
  const served = await post(node, "/v1/completions", completion);
  expect(served.status, served.body).toBe(200);
}, 30_000);

it("answers the 504 of a step that timed out while the node drains, not a shutdown's 503", async () => {
  const engine = new NeverAnsweringDouble();
  const { node, model } = await soloNode(engine, { tokenizeTimeoutMs: "500" });
  keep(node);
  engine.hang = "tokenize";
  const answer = post(node, "/v1/completions", { model, prompt: "a question", max_tokens: 2 });
  const deadline = Date.now() + 10_000;
  while (intakeOf(node) === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(intakeOf(node)).toBe(1);
  // The drain waits for the request taken in: its tokenize ends by the bound, not by the shutdown.
  const stopped = node.stop();
  expectTimedOut(await answer, "tokenize");
  await stopped;
}, 30_000);

it("answers a step still open when the drain ends with the shutdown's 503, its call aborted", async () => {
  const engine = new AbortOnlyDouble();
  // The bound far past the drain: only the drain's end can answer the step.
  const { node, model } = await soloNode(engine, { tokenizeTimeoutMs: "600000", drainSec: "0.5" });
  keep(node);
  engine.hang = "tokenize";
  const answer = post(node, "/v1/completions", { model, prompt: "a question", max_tokens: 2 });
  await until(() => intakeOf(node) === 1);
  expect(intakeOf(node)).toBe(1);
  const stopped = node.stop();
  const a = await answer;
  expect(a.status, a.body).toBe(503);
  expect(a.body).toContain("shut down");
  expect(engine.aborted).toBe(1);
  await stopped;
}, 30_000);

it("counts a timed-out tokenize the engine still runs against --max-pending until it ends", async () => {
  const engine = new NeverAnsweringDouble();
  const { node, model } = await soloNode(engine, { maxPending: "2", tokenizeTimeoutMs: "200" });
  keep(node);
  const completion = { model, prompt: "a question", max_tokens: 2 };
  engine.hang = "tokenize";
  expectTimedOut(await post(node, "/v1/completions", completion), "tokenize");
  expectTimedOut(await post(node, "/v1/completions", completion), "tokenize");
  // Two engine calls still open: a third client must not make it three (a burst, many more).
  const third = await post(node, "/v1/completions", completion);
  expect(third.status, third.body).toBe(429);
  expect(engine.hung.length).toBe(2);
  // /cluster says why the node refuses with no client waiting.
  expect(intakeOf(node)).toBe(2);
  engine.hang = undefined;
  await endHung(engine, node);
  const served = await post(node, "/v1/completions", completion);
  expect(served.status, served.body).toBe(200);
}, 30_000);
