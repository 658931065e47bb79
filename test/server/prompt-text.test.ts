import { afterEach, describe, expect, it } from "vitest";
import type { EngineChunk, EngineRequest } from "../../src/core/engine.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { startNode } from "../../src/server/runtime/start-node.js";
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

/** A's view of B on `/cluster`, and B's node counters as B's own `/cluster` shows them. */
async function views(a: NodeHandle, b: NodeHandle) {
  const va = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as { peers: PeerRow[] };
  const vb = (await (await fetch(`${b.apiUrl}/cluster`)).json()) as { stats: { promptTextRefused: number } };
  return { ofB: va.peers[0] as PeerRow, statsB: vb.stats };
}

/** Sends `prompt` to A, which must forward it to B; returns the answer's text. */
async function askAtA(a: NodeHandle, model: string, prompt: string) {
  const res = await postCompletion(a.apiUrl, { model, prompt, max_tokens: 4 });
  expect(res.headers.get("x-prefixmesh-served-by")).toBe("B");
  const body = (await res.json()) as { choices: { text: string }[] };
  return body.choices[0]?.text;
}

/**
 * A forwards a prompt to B (B holds its prefix); returns what B's engine was handed, what B's engine
 * ran, and whether A now sends B the text.
 */
async function forwardOnce(bNeedsText: boolean) {
  const b = new RecordingEngine(bNeedsText);
  const {
    a: na,
    b: nb,
    model,
  } = await routedPair(
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
  const runsBefore = b.seen.length;
  const prompt = `${prefix} asked at A`;
  const text = await askAtA(na, model, prompt);
  const { ofB } = await views(na, nb);
  return { prompt, atB: b.seen.at(-1), runsAtB: b.seen.length - runsBefore, text, sendsText: ofB.promptText };
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

  // Either mode reads B's hello afresh after its restart (full mesh: the new epoch in B's snapshots,
  // static-peer-checks.ts; scuttlebutt: B's rejoin is verified), so once A shows so, its forward
  // carries the text at once. (A forward that races the re-read is refused by B and re-sent with the
  // text by A's transport: test/net/transport-forward-fields.test.ts.)
  it.each([["full"], ["scuttlebutt"]] as const)(
    "is sent from then on when the peer's engine has come to need it since its hello (gossip %s)",
    async (gossip) => {
      // B runs from tokens alone, and A learns so from its hello…
      const {
        a: na,
        b: nb,
        model,
      } = await routedPair(
        prefix,
        { B: new RecordingEngine(false) },
        {
          extra: { gossip },
          ready: (p) => p.promptText === false,
          onStart: (x, y) => {
            nodes = [x, y];
          },
        },
      );
      // …then B restarts under the same id and ports with an engine that needs the text: what A knows
      // of B's hello is stale, so A's next forward leaves the text out.
      await nb.stop();
      const b = new RecordingEngine(true);
      const nb2 = await startNode(nb.settings, { logger: nb.logger, engine: b });
      nodes = [na, nb2];
      await postCompletion(nb2.apiUrl, { model, prompt: `${prefix} warm`, max_tokens: 1 });
      const learned = async () => {
        const { ofB } = await views(na, nb2);
        return (ofB?.estimateTokens ?? 0) >= 256 && ofB?.promptText === true;
      };
      for (const deadline = Date.now() + 15_000; !(await learned()); ) {
        // Until the restarted B (re)joins, A may list no member at all (gossip scuttlebutt).
        if (Date.now() > deadline) throw new Error("A never learned the restarted B's tree and hello");
        await new Promise((r) => setTimeout(r, 20));
      }
      const runsBefore = b.seen.length;
      const prompt = `${prefix} asked at A`;
      expect(await askAtA(na, model, prompt)).toBeTruthy();
      const { ofB, statsB } = await views(na, nb2);
      // Sent with the text at once: B's engine ran it once, and B's node refused nothing.
      expect(b.seen.length - runsBefore).toBe(1);
      expect(b.seen.at(-1)).toBe(prompt);
      expect(ofB.promptText).toBe(true);
      expect(statsB.promptTextRefused).toBe(0);
    },
  );
});
