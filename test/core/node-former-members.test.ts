/**
 * gossip "scuttlebutt": a former member SWIM still remembers is shown down with why it went, "left"
 * (it said goodbye: a planned stop an operator's alert must not fire on) or "dead" (declared dead).
 */
import { describe, expect, it } from "vitest";
import { daemonGossip, type Harness } from "./node-harness.js";

const shown = (h: Harness, id: string) =>
  h
    .node("A")
    .shownPeers()
    .find((p) => p.id === id);

describe("former members: why each went (gossip scuttlebutt)", () => {
  it("a member that said goodbye shows gone 'left', one that crashed shows 'dead'", () => {
    const h = daemonGossip(["A", "B", "C"], 250);
    expect(shown(h, "B")).toMatchObject({ liveness: "live" });
    expect(shown(h, "B")?.gone).toBeUndefined();

    h.apply("B", h.node("B").goodbye());
    h.crash("B");
    for (let t = 0; shown(h, "B")?.gone === undefined; t += 10) {
      if (t > 30_000) throw new Error("A never saw B go");
      h.advanceLive(10);
    }
    expect(shown(h, "B")).toMatchObject({ liveness: "down", gone: "left", goneForMs: expect.any(Number) });

    h.crash("C"); // no goodbye: SWIM's probes fail until it is declared dead
    for (let t = 0; shown(h, "C")?.gone === undefined; t += 10) {
      if (t > 120_000) throw new Error("A never declared C dead");
      h.advanceLive(10);
    }
    expect(shown(h, "C")).toMatchObject({ liveness: "down", gone: "dead" });
    expect(shown(h, "B")?.gone).toBe("left");
  });
});
