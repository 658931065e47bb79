/**
 * A mesh of mixed models in the core: a request naming a model is routed only among the nodes that
 * serve it; a node that does not serve it routes it and never runs it; no node serving it → the
 * request fails at once; requests naming no model route as before.
 */
import { describe, expect, it } from "vitest";
import { PeerModels, servesModel } from "../../src/core/node/models.js";
import { forwardsIn, Harness, prompt } from "./node-harness.js";

const MODELS: Record<string, string[]> = { A: ["m1"], B: ["m1"], C: ["m2", "m2-lora"], D: ["m2"] };

function mesh(): Harness {
  const h = new Harness(["A", "B", "C", "D"], { policy: "affinity" }, 10_000, (id) => ({
    models: MODELS[id] as string[],
  }));
  for (const id of h.members.keys())
    for (const peer of h.members.keys())
      if (peer !== id) h.node(id).peerModels.set(peer, MODELS[peer] as string[]);
  h.gossip(3);
  return h;
}

const ask = (h: Harness, at: string, reqId: string, model: string | undefined, q = 1) => {
  const eff = h.input(at, {
    type: "client-request",
    reqId,
    request: { id: reqId, tokens: prompt(7, q), maxTokens: 1, ...(model !== undefined ? { model } : {}) },
  });
  h.deliver();
  h.finishRuns();
  h.deliver();
  return { forwards: forwardsIn(eff), reply: h.repliesFor(reqId)[0] };
};

describe("mixed models: routing", () => {
  it("a request runs only on a node serving its model, whichever node it enters at", () => {
    const h = mesh();
    let n = 0;
    for (const at of ["A", "B", "C", "D"])
      for (const model of ["m1", "m2", "m2-lora"]) {
        const { reply } = ask(h, at, `r${++n}`, model, n);
        expect(reply?.outcome.ok, `${model} at ${at}`).toBe(true);
        const by = reply?.record.servedBy as string;
        expect(MODELS[by], `${model} entering at ${at} served by ${by}`).toContain(model);
        // The entry runs it itself exactly when it serves it (affinity, nothing cached: ties to self).
        expect(by === at).toBe(MODELS[at]?.includes(model));
      }
  });

  it("follows the prefix among the model's nodes only", () => {
    const h = mesh();
    ask(h, "D", "warm", "m2", 1);
    h.gossip(3);
    // Entering at A (m1 only): D holds the prefix, and D serves m2.
    const { forwards, reply } = ask(h, "A", "again", "m2", 2);
    expect(forwards).toEqual(["D"]);
    expect(reply?.record.actualHitTokens).toBeGreaterThan(0);
  });

  it("fails at once, never running it, when no reachable node serves the model", () => {
    const h = mesh();
    const { forwards, reply } = ask(h, "A", "nobody", "m3");
    expect(forwards).toEqual([]);
    expect(reply?.outcome).toMatchObject({ ok: false, code: "unserved" });
    expect(h.node("A").stats().servedLocal).toBe(0);
  });

  it("refuses a forward for a model it does not serve (retryable), so the origin moves on", () => {
    const h = mesh();
    // B wrongly believes A serves m2 (a stale hello), and rightly that C does; D it thinks serves m1.
    h.node("B").peerModels.set("A", ["m2"]);
    h.node("B").peerModels.set("D", ["m1"]);
    const { reply } = ask(h, "B", "stale", "m2");
    expect(reply?.outcome.ok).toBe(true);
    expect(reply?.record.servedBy).toBe("C");
    expect(h.node("A").stats().servedForPeers).toBe(0);
    expect(h.node("B").stats().servedLocal).toBe(0);
  });

  it("requests naming no model, and nodes configured with none, route as before", () => {
    expect(servesModel([], "anything")).toBe(true);
    expect(servesModel(["m1"], undefined)).toBe(true);
    expect(servesModel(["m1"], "m2")).toBe(false);
    const p = new PeerModels();
    expect(p.serves("X", "m1")).toBe(true);
    p.set(
      "X",
      Array.from({ length: 100 }, (_, i) => `m${i}`),
    );
    expect(p.of("X")).toHaveLength(64);
    p.set("X", []);
    expect(p.serves("X", "zzz")).toBe(true);
  });
});
