/**
 * SWIM's leave moves the leaver's trust record out of the membership (trust.ts `remove`: kept for its
 * return, listed in `departedTrust`) once its requests moved on (origin.ts `departed`): also when no
 * request of ours waits on it, so none is left behind as a live record of a non-member.
 */
import { describe, expect, it } from "vitest";
import { daemonGossip, type Harness } from "./node-harness.js";

const liveTrustOfB = (h: Harness) =>
  h
    .node("A")
    .peers()
    .find((p) => p.id === "B")?.trust;
const keptTrustOfB = (h: Harness) =>
  h
    .node("A")
    .departedTrust(10)
    .peers.find((p) => p.id === "B")?.trust;

describe("SWIM's leave and the leaver's trust", () => {
  it("with no request waiting on it: its record moves to departedTrust at once", () => {
    const h = daemonGossip(["A", "B"], 250);
    const before = liveTrustOfB(h);
    expect(before).toBeDefined();
    expect(keptTrustOfB(h)).toBeUndefined();
    h.apply("B", h.node("B").goodbye());
    h.deliverMesh();
    const statusOfB = h
      .node("A")
      .meshMembers()
      ?.find((m) => m.id === "B")?.status;
    expect(statusOfB).toBe("left");
    expect(liveTrustOfB(h)).toBeUndefined();
    expect(keptTrustOfB(h)).toEqual(before);
    expect(h.node("A").departedTrust(10).total).toBe(1);
  });
});
