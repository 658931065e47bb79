/**
 * The dashboard's lines for `/cluster`'s `departedTrust` (dashboard/departed.ts): each kept record
 * as text, bounded, and nothing odd in the JSON breaks the page.
 */
import { describe, expect, it } from "vitest";
import { departedLines, MAX_DEPARTED_SHOWN, peerAlertText } from "../../src/server/dashboard/departed.js";

const rec = (id: string, state = "open") => ({
  id,
  trust: { score: 0.421, state, failures: 3, refusals: 0, opened: 1 },
  goneForMs: 12_400,
  epoch: 17,
});

describe("dashboard: departed peers' kept trust", () => {
  it("a line per record: its breaker, and why (score, failures, when it went, its epoch)", () => {
    expect(departedLines({ total: 1, peers: [rec("B")] })).toEqual({
      lines: [
        { id: "B", state: "open", detail: "score 0.42 · 3 failures · opened 1× · gone 12 s · epoch 17" },
      ],
      more: 0,
    });
    expect(departedLines({ total: 1, peers: [{ ...rec("C"), epoch: null }] }).lines[0]?.detail).toBe(
      "score 0.42 · 3 failures · opened 1× · gone 12 s",
    );
    // Of its failures, those for answering late (trust.ts `late`), when any.
    const slow = { ...rec("D"), trust: { ...rec("D").trust, late: 2 } };
    expect(departedLines({ total: 1, peers: [slow] }).lines[0]?.detail).toBe(
      "score 0.42 · 3 failures (2 late) · opened 1× · gone 12 s · epoch 17",
    );
  });

  it(`lists at most ${MAX_DEPARTED_SHOWN} and counts the rest, those /cluster left out included`, () => {
    const peers = Array.from({ length: 8 }, (_, i) => rec(`p${i}`));
    const shown = departedLines({ total: 40, peers });
    expect(shown.lines.map((l) => l.id)).toEqual(["p0", "p1", "p2", "p3", "p4"]);
    expect(shown.more).toBe(35);
  });

  it("nothing to show for an older node or garbage", () => {
    for (const v of [undefined, null, 3, "x", [], { peers: "x" }, { total: 2 }])
      expect(departedLines(v).lines).toEqual([]);
    // Entries that are not objects are skipped, not thrown on.
    expect(departedLines({ peers: [null, 3, "x", { id: "D" }] }).lines.map((l) => l.id)).toEqual(["D"]);
    expect(departedLines({ peers: [{ id: "B", trust: null }] }).lines[0]).toEqual({
      id: "B",
      state: "unknown",
      detail: "score 0.00 · 0 failures · opened 0× · gone 0.0 s",
    });
  });
});

describe("dashboard: the alert for a peer not live", () => {
  it("tells a member that said goodbye from one declared dead (gossip scuttlebutt)", () => {
    const gone = { liveness: "down", goneForMs: 12_000 };
    expect(peerAlertText({ id: "B", ...gone, gone: "left" })).toBe(
      "Peer B is down (said goodbye: a planned stop): not routed to; no longer a member for 12 s, its estimate dropped.",
    );
    expect(peerAlertText({ id: "C", ...gone, gone: "dead" })).toContain("Peer C is down (declared dead)");
    // gossip full, or an older node: why is not known.
    expect(peerAlertText({ id: "D", liveness: "down", estimateAgeMs: 20_000 })).toBe(
      "Peer D is down (said goodbye, or silent too long): not routed to; last heard 20 s ago.",
    );
    expect(peerAlertText({ id: "E", liveness: "suspected" })).toContain("cannot be reached (suspected)");
  });
});
