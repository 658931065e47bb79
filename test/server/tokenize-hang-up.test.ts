/**
 * A client that hangs up while its chat template or tokenize is at the engine: the engine's call is
 * aborted then (a remote engine's request cancelled), not left to run until the engine answers or
 * `--tokenize-timeout-ms` passes; one that ignores the abort holds a `--max-pending` place until it
 * ends, as an overdue step does. The engines are TEST DOUBLES: the simulator's, whose held steps end
 * only by their signal's abort, or only when the test releases them.
 */
import { request } from "node:http";
import { expect, it } from "vitest";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { waitFor } from "../e2e/helpers.js";
import { AbortOnlyDouble } from "./abort-only-double.js";
import { intakeOf, nodesStoppedAfterEach, soloNode } from "./helpers.js";
import { SignalIgnoringDouble } from "./signal-ignoring-double.js";

const keep = nodesStoppedAfterEach();

function overdueOf(node: NodeHandle): number {
  return (node.runtime as unknown as { steps: { overdue: number } }).steps.overdue;
}

/** Posts `body` to `path` of `node` and hangs up once `held()` says its step is at the engine. */
async function hangUpWhileHeld(node: NodeHandle, path: string, body: object, held: () => boolean) {
  // node:http, not fetch: its destroy closes the socket at once.
  const req = request(`${node.apiUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    agent: false,
  });
  req.on("error", () => {});
  req.end(JSON.stringify(body));
  await waitFor(held, 10_000, "the step to be held at the engine");
  req.destroy();
}

async function completes(node: NodeHandle, model: string): Promise<void> {
  const r = await fetch(`${node.apiUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: "a question", max_tokens: 2 }),
  });
  expect(r.status, await r.text()).toBe(200);
}

it("aborts the engine's template or tokenize when its client hangs up, and frees its place", async () => {
  const engine = new AbortOnlyDouble();
  // The bound far off: only the hang-up can end the step.
  const { node, model } = await soloNode(engine, { maxPending: "1", tokenizeTimeoutMs: "600000" });
  keep(node);
  const asks: [AbortOnlyDouble["hang"], string, object][] = [
    ["tokenize", "/v1/completions", { model, prompt: "a question", max_tokens: 2 }],
    ["template", "/v1/chat/completions", { model, messages: [{ role: "user", content: "hi" }] }],
    ["tokenize", "/tokenize", { model, prompt: "a question" }],
  ];
  for (const [i, [hang, path, body]] of asks.entries()) {
    engine.hang = hang;
    await hangUpWhileHeld(node, path, body, () => engine.held === i + 1);
    await waitFor(() => engine.aborted === i + 1, 10_000, "the engine's call to be aborted");
    await waitFor(() => intakeOf(node) === 0 && overdueOf(node) === 0, 10_000, "its place to be freed");
    expect(engine.aborted).toBe(i + 1);
  }
  // With --max-pending 1, a place still held would refuse this with 429.
  engine.hang = undefined;
  await completes(node, model);
}, 30_000);

it("counts a hung-up client's step the engine still runs against --max-pending until it ends", async () => {
  // Its tokenizes, once `hang` is set, wait until the test releases them.
  let hang = false;
  const engine = new SignalIgnoringDouble(() => hang);
  const { node, model } = await soloNode(engine, { maxPending: "1", tokenizeTimeoutMs: "600000" });
  keep(node);
  hang = true;
  const body = { model, prompt: "a question", max_tokens: 2 };
  await hangUpWhileHeld(node, "/v1/completions", body, () => engine.held.length === 1);
  await waitFor(() => overdueOf(node) === 1 && intakeOf(node) === 1, 10_000, "the step to be overdue");
  expect(overdueOf(node)).toBe(1);
  hang = false;
  const refused = await fetch(`${node.apiUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(refused.status, await refused.text()).toBe(429);
  engine.release();
  await waitFor(() => overdueOf(node) === 0, 10_000, "the step to end");
  await completes(node, model);
}, 30_000);
