import { afterEach, describe, expect, it } from "vitest";
import type { EngineChunk, EngineRequest } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { resolveProfile } from "../../src/sim/profiles.js";
import { SimEngine } from "../../src/sim/sim-engine.js";
import { modelOf, postCompletion } from "../api-client.js";
import { pair } from "./helpers.js";

/** Test-only engine: the simulator's, recording the prompt text of every request it runs. */
class RecordingEngine extends SimEngine {
  readonly seen: (string | undefined)[] = [];
  constructor(needsPromptText: boolean) {
    super({ profile: resolveProfile("paper-h100-qwen0.5b"), timeScale: 0.001 });
    this.info.needsPromptText = needsPromptText;
  }
  override run(req: EngineRequest, onChunk?: (c: EngineChunk) => void, signal?: AbortSignal) {
    this.seen.push(req.prompt);
    return super.run(req, onChunk, signal);
  }
}

let nodes: NodeHandle[] = [];
afterEach(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  nodes = [];
});

const prefix = Array.from({ length: 300 }, (_, i) => `text${i}`).join(" ");
const post = postCompletion;

/**
 * A forwards a prompt to B (B holds its prefix); returns what B's engine was handed, what B's engine
 * ran, and whether A now sends B the text. `needsTextLater`: B's engine changes its answer after its
 * hello (as after a restart with another engine under the same id).
 */
async function forwardOnce(bNeedsText: boolean, needsTextLater = bNeedsText) {
  const b = new RecordingEngine(bNeedsText);
  const [na, nb] = await pair({ policy: "affinity" }, { B: b });
  nodes = [na, nb];
  const model = await modelOf(nb.apiUrl);
  await post(nb.apiUrl, { model, prompt: `${prefix} warm`, max_tokens: 1 });
  let view: { peers: { estimateTokens: number; promptText: boolean }[] } = { peers: [] };
  for (const deadline = Date.now() + 5000; ; ) {
    view = (await (await fetch(`${na.apiUrl}/cluster`)).json()) as typeof view;
    // Learned B's tree, and B's hello (which says promptText: false when B needs tokens only).
    if ((view.peers[0]?.estimateTokens ?? 0) >= 256 && view.peers[0]?.promptText === bNeedsText) break;
    if (Date.now() > deadline) throw new Error(`A never learned B's tree or hello: ${JSON.stringify(view)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  b.info.needsPromptText = needsTextLater;
  const runsBefore = b.seen.length;
  const prompt = `${prefix} asked at A`;
  const res = await post(na.apiUrl, { model, prompt, max_tokens: 4 });
  expect(res.headers.get("x-prefixmesh-served-by")).toBe("B");
  const body = (await res.json()) as { choices: { text: string }[] };
  const after = (await (await fetch(`${na.apiUrl}/cluster`)).json()) as typeof view;
  return {
    prompt,
    atB: b.seen.at(-1),
    runsAtB: b.seen.length - runsBefore,
    text: body.choices[0]?.text,
    sendsText: after.peers[0]?.promptText,
  };
}

describe("prompt text in forwards", () => {
  it("is left out for a peer whose engine runs from tokens alone, and the answer still comes back", async () => {
    const { atB, text } = await forwardOnce(false);
    expect(atB).toBeUndefined();
    expect(text?.length).toBeGreaterThan(0);
  });

  it("is carried to a peer whose engine needs it", async () => {
    const { prompt, atB } = await forwardOnce(true);
    expect(atB).toBe(prompt);
  });

  it("is sent again, and from then on, when the peer's engine has come to need it since its hello", async () => {
    const { prompt, atB, runsAtB, sendsText } = await forwardOnce(false, true);
    // B refused the tokens-only forward before its node or engine saw it; A re-sent it with the text.
    expect(runsAtB).toBe(1);
    expect(atB).toBe(prompt);
    expect(sendsText).toBe(true);
  });
});
