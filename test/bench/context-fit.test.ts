import pino from "pino";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { checkContextFit, fits, fitWarning, summarizeFit } from "../../src/bench/context-fit.js";
import { generatedContext } from "../../src/cli/cluster.js";
import { MODEL_PRESETS } from "../../src/engines/gguf/presets.js";
import { DEFAULT_PROFILE, resolveProfile } from "../../src/engines/sim/profiles.js";
import { SimEngine } from "../../src/engines/sim/sim-engine.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import type { Workload, WorkloadRequest } from "../../src/workload/types.js";
import { waitFor } from "../e2e/helpers.js";
import { intakeOf, loopbackNodeSettings } from "../server/helpers.js";

const request = (id: string, words: number, maxTokens = 1): WorkloadRequest => ({
  id,
  group: "g",
  tokens: new Uint32Array(words),
  prompt: Array.from({ length: words }, (_, i) => `w${i}`).join(" "),
  maxTokens,
});
const workload = (requests: WorkloadRequest[]): Workload => ({
  name: "test",
  synthetic: true,
  requests,
  arrival: "closed-loop",
});

describe("bench: does the workload fit the model's context, before the run", () => {
  test("a request fits as the API decides: prompt below the context, prompt + max_tokens within it", () => {
    expect(fits(39, 1, 40)).toBe(true);
    expect(fits(40, 0, 40)).toBe(false);
    expect(fits(35, 6, 40)).toBe(false);
  });

  test("counts requests, not distinct prompts, and only those counted", () => {
    const reqs = [request("a", 10), request("b", 50), request("c", 50), request("d", 5)];
    const counts = new Map([
      [reqs[0]?.prompt, 10],
      [reqs[1]?.prompt, 50],
    ]);
    const fit = summarizeFit(reqs, (t) => counts.get(t), 40);
    // b and c share a prompt: both refused; d was not counted.
    expect(fit).toEqual({ known: true, contextTokens: 40, checked: 3, tooLong: 2, longest: 51 });
    expect(fitWarning(fit, "m", 4)).toMatch(
      /^warning: 2 of 3 checked \(of 4\) requests \(67%\) do not fit model m's context of 40 tokens/,
    );
    expect(fitWarning({ ...fit, tooLong: 0 }, "m", 3)).toBeUndefined();
    expect(fitWarning({ known: false, reason: "x" }, "m", 3)).toMatch(/^note: could not check/);
  });

  describe("against a real node (sim engine, 40-token context)", () => {
    let node: NodeHandle;
    beforeAll(async () => {
      const [api, peer] = [await freePort("127.0.0.1"), await freePort("127.0.0.1")];
      const settings = resolveNodeSettings(
        {
          id: "A",
          engine: "sim",
          listen: `127.0.0.1:${api}`,
          peerListen: `127.0.0.1:${peer}`,
          logLevel: "silent",
        },
        {},
      );
      const engine = new SimEngine({
        profile: resolveProfile(DEFAULT_PROFILE),
        timeScale: 0.001,
        maxContextTokens: 40,
      });
      node = await startNode(settings, { engine, logger: pino({ level: "silent" }) });
    });
    afterAll(async () => {
      await node.stop();
    });

    test("learns the context from /v1/models and the counts from /tokenize", async () => {
      const w = workload([request("short", 10), request("long", 45), request("edge", 39, 2)]);
      const fit = await checkContextFit(node.apiUrl, node.runtime.modelId, w);
      expect(fit).toEqual({ known: true, contextTokens: 40, checked: 3, tooLong: 2, longest: 46 });
    });

    test("a node that cannot answer is a note, not a failure", async () => {
      const fit = await checkContextFit("http://127.0.0.1:1", "m", workload([request("a", 1)]));
      expect(fit.known).toBe(false);
    });
  });

  describe("against a node whose --max-pending is below the check's concurrency", () => {
    /** A tokenize that takes a moment, as a remote server's does: the check's requests overlap. */
    class SlowTokenizeEngine extends SimEngine {
      /** Set: the next tokenizes wait for it (another client's request holding the node's one slot). */
      gate: Promise<void> | undefined;
      override async tokenize(text: string) {
        await new Promise((r) => setTimeout(r, 30));
        await this.gate;
        return super.tokenize(text);
      }
    }
    let node: NodeHandle;
    let engine: SlowTokenizeEngine;
    /** The node's request log: where the check's refusals show. */
    const logged: string[] = [];
    beforeAll(async () => {
      const settings = await loopbackNodeSettings({ engine: "sim", maxPending: "1" });
      engine = new SlowTokenizeEngine({
        profile: resolveProfile(DEFAULT_PROFILE),
        timeScale: 0.001,
        maxContextTokens: 40,
      });
      const logger = pino({ level: "info" }, { write: (line: string) => logged.push(line) });
      node = await startNode(settings, { engine, logger });
    });
    afterAll(async () => {
      await node.stop();
    });

    test("still counts every prompt: a /tokenize refused 429 is asked again, fewer at once", async () => {
      const reqs = Array.from({ length: 8 }, (_, i) => request(`r${i}`, 10 + i));
      const fit = await checkContextFit(node.apiUrl, node.runtime.modelId, workload(reqs));
      expect(fit).toEqual({ known: true, contextTokens: 40, checked: 8, tooLong: 0, longest: 18 });
    }, 30_000);

    test("waits as Retry-After says while another client holds the node's one slot", async () => {
      let open = () => {};
      engine.gate = new Promise<void>((r) => {
        open = r;
      });
      const other = fetch(`${node.apiUrl}/tokenize`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt: "another client" }),
      });
      await waitFor(() => intakeOf(node) === 1, 10_000, "the other client's /tokenize to be held");
      const fit = checkContextFit(node.apiUrl, node.runtime.modelId, workload([request("a", 3)]));
      // Refused at least once (the slot is held), then let go: the check asks again and counts it.
      const refused = () => logged.filter((l) => l.includes('"status":429')).length;
      const before = refused();
      await waitFor(() => refused() > before, 10_000, "the check's /tokenize to be refused");
      engine.gate = undefined;
      open();
      expect((await other).status).toBe(200);
      expect(await fit).toEqual({ known: true, contextTokens: 40, checked: 1, tooLong: 0, longest: 4 });
    }, 30_000);
  });

  test("the demo's generated model gets its whole context per slot", () => {
    expect(generatedContext("generated")).toBe(MODEL_PRESETS.bench.contextLength);
    expect(generatedContext("generated:tiny")).toBe(MODEL_PRESETS.tiny.contextLength);
    expect(generatedContext("/models/x.gguf")).toBeUndefined();
    expect(generatedContext("generated:nope")).toBeUndefined();
  });
});
