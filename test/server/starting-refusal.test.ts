/**
 * A client request reaching a node whose API is up but which is still starting (calibrating its
 * engine): refused 503 "node is starting" at admission, before its prompt is templated or tokenized.
 * A `/tokenize` is still answered: it is no request to serve.
 * A test-double engine holds the calibration's first tokenize until the test fails it.
 */
import pino from "pino";
import { afterEach, expect, it } from "vitest";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { waitFor } from "../e2e/helpers.js";
import { loopbackNodeSettings, TestSimEngine } from "./helpers.js";

/** The simulator's engine, its calibration held until `failCalibration`; it records every other prompt. */
class HeldCalibrationDouble extends TestSimEngine {
  readonly prompts: string[] = [];
  private fail: ((err: Error) => void) | undefined;
  override async tokenize(text: string) {
    if (text.startsWith("calibration-") && this.fail === undefined)
      await new Promise<void>((_go, fail) => {
        this.fail = fail;
      });
    if (!text.startsWith("calibration-")) this.prompts.push(text);
    return super.tokenize(text);
  }
  get calibrating(): boolean {
    return this.fail !== undefined;
  }
  failCalibration(): void {
    this.fail?.(new Error("calibration stopped by the test"));
  }
}

let starting: Promise<NodeHandle> | undefined;
let engine: HeldCalibrationDouble | undefined;
afterEach(async () => {
  engine?.failCalibration();
  await (await starting?.catch(() => undefined))?.stop();
  starting = undefined;
});

it.each(["/v1/completions", "/v1/chat/completions"])(
  "refuses %s while the node starts, without templating or tokenizing it",
  async (path) => {
    const settings = await loopbackNodeSettings({ engine: "sim", calibrationMs: 60_000 });
    const double = new HeldCalibrationDouble();
    engine = double;
    starting = startNode(settings, { logger: pino({ level: "silent" }), engine: double });
    const api = `http://${settings.listen}`;
    await waitFor(() => double.calibrating, 10_000, "the calibration to be held");
    const body = {
      model: double.info.model,
      prompt: "a question",
      max_tokens: 2,
      messages: [{ role: "user", content: "hi" }],
    };
    let answer: { status: number; body: string; retry: string | null } | undefined;
    await waitFor(
      async () => {
        answer = await fetch(`${api}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        }).then(
          async (r) => ({ status: r.status, body: await r.text(), retry: r.headers.get("retry-after") }),
          () => undefined,
        );
        return answer !== undefined;
      },
      10_000,
      "the API to answer",
    );
    expect(answer?.status, answer?.body).toBe(503);
    expect(JSON.parse(answer?.body ?? "{}")).toMatchObject({
      error: { message: "node is starting", type: "server_error" },
    });
    expect(answer?.retry).toBe("1");
    expect(double.prompts).toEqual([]);
    const tokenize = await fetch(`${api}/tokenize`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: "a b" }),
    });
    expect(tokenize.status).toBe(200);
  },
  30_000,
);
