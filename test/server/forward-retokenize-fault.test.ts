/**
 * A forward in another model's tokens (mixed meshes) is tokenized again at the serving node; when its
 * engine's `/tokenize` fails, the error says whose fault it is, as a failed run's does: the prompt
 * refused (`input`) or the engine busy (`load`) is a back-off at the origin, not a failure mark, so a
 * client's bad prompts cannot get honest peers demoted. Its text is held to a failed run's rules: the
 * engine URL cut to its path, the length bounded. The engine is a TEST DOUBLE: the simulator's, whose
 * `tokenize` fails as the prompt asks.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Tokens } from "../../src/core/engine.js";
import { EngineInputError, EngineUnavailableError } from "../../src/engines/errors.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { postForeignForward } from "./forward-post.js";
import { pair, TestSimEngine } from "./helpers.js";

/** Test double: tokenizes as the simulator does, unless the text names a failure. */
class FailingTokenizer extends TestSimEngine {
  override async tokenize(text: string): Promise<Tokens> {
    const url = "http://user:secret@engine.internal:8080/tokenize";
    if (text.startsWith("refuse")) throw new EngineInputError(`POST ${url} → HTTP 400: prompt refused`, 400);
    if (text.startsWith("busy"))
      throw new EngineUnavailableError(`POST ${url} failed after 1 attempt(s): HTTP 503`, 503, 5_000);
    if (text.startsWith("long"))
      throw new EngineUnavailableError(`POST ${url} → HTTP 500: ${"x".repeat(8_000)}`);
    if (text.startsWith("down")) throw new EngineUnavailableError(`POST ${url} failed: ECONNREFUSED`);
    return super.tokenize(text);
  }
}

/** POSTs a forward in a foreign tokenizer's tokens to `node` as member B; its final record's msg. */
function forward(node: NodeHandle, reqId: string, prompt: string) {
  return postForeignForward(node, reqId, { prompt }, 20_000);
}

describe("a forward its engine cannot tokenize", () => {
  let a: NodeHandle;
  let b: NodeHandle;
  beforeAll(async () => {
    [a, b] = await pair({ simTimeScale: "0.001", mixedModels: true }, { A: new FailingTokenizer() });
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it.each([
    ["refuse this prompt", "input"],
    ["busy now", "load"],
    ["down for good", "engine"],
  ])("%s: an error saying fault %s", async (prompt, fault) => {
    const msg = await forward(a, `rt-${fault}`, prompt);
    expect(msg.type).toBe("error");
    expect(msg.fault).toBe(fault);
    expect(msg.error).toMatch(/^cannot tokenize a forward: /);
  });

  it("keeps the engine's host and credentials to itself, and its text bounded", async () => {
    const down = await forward(a, "rt-down-url", "down again");
    expect(down.error).toMatch(/^cannot tokenize a forward: POST \/tokenize failed: ECONNREFUSED$/);
    // A server's long body would not even pass the origin's wire bound (4096): the peer's error lost.
    const long = await forward(a, "rt-long", "long story");
    expect([long.type, long.fault]).toEqual(["error", "engine"]);
    expect(long.error?.length).toBeLessThanOrEqual(400);
  });
});
