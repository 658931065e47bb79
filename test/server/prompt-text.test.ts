import { afterEach, describe, expect, it } from "vitest";
import type { EngineChunk, EngineRequest } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { postCompletion } from "../api-client.js";
import { type PeerRow, routedPair, TestSimEngine } from "./helpers.js";

/** Test-only engine: the simulator's, recording the prompt text of every request it runs. */
class RecordingEngine extends TestSimEngine {
  readonly seen: (string | undefined)[] = [];
  constructor(needsPromptText: boolean) {
    super();
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

/**
 * A forwards a prompt to B (B holds its prefix); returns what B's engine was handed, what B's engine
 * ran, and whether A now sends B the text. `needsTextLater`: B's engine changes its answer after its
 * hello (as after a restart with another engine under the same id).
 */
async function forwardOnce(bNeedsText: boolean, needsTextLater = bNeedsText) {
  const b = new RecordingEngine(bNeedsText);
  const { a: na, model } = await routedPair(
    prefix,
    { B: b },
    {
      // …and learned B's hello, which says promptText: false when B needs tokens only.
      ready: (p) => p.promptText === bNeedsText,
      onStart: (x, y) => {
        nodes = [x, y];
      },
    },
  );
  b.info.needsPromptText = needsTextLater;
  const runsBefore = b.seen.length;
  const prompt = `${prefix} asked at A`;
  const res = await postCompletion(na.apiUrl, { model, prompt, max_tokens: 4 });
  expect(res.headers.get("x-prefixmesh-served-by")).toBe("B");
  const body = (await res.json()) as { choices: { text: string }[] };
  const after = (await (await fetch(`${na.apiUrl}/cluster`)).json()) as { peers: PeerRow[] };
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
