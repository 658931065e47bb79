/**
 * `/cluster` `departedTrust`: the trust kept of a peer out of the membership (trust.ts), what it
 * comes back with, so an operator sees that a returning peer starts demoted, and why.
 */
import { describe, expect, it } from "vitest";
import { Harness, prompt, STALLER_TRUST } from "../core/node-harness.js";
import { harnessClusterView } from "./helpers.js";

const view = (h: Harness, id: string) => harnessClusterView(h, id, 10_000);

const trustOfB = (h: Harness) => h.node("A").peers()[0]?.trust;

/** A and B with peer trust, B a staller: it acks A's forwards and answers none, until demoted. */
function demotedB(): Harness {
  const h = new Harness(["A", "B"], STALLER_TRUST);
  for (const t of [1, 2, 3]) h.warm("B", `warm${t}`, prompt(t, 0));
  h.gossip(3);
  for (const t of [1, 2, 3]) {
    h.client("A", `r${t}`, prompt(t, 10 + t));
    h.deliver((m) => m.msg.type === "forward" || m.msg.type === "forward-ack");
    h.drop((m) => m.from === "B" && (m.msg.type === "result" || m.msg.type === "error"));
  }
  for (let ms = 0; trustOfB(h)?.state !== "open"; ms += 10) {
    if (ms > 10_000) throw new Error("B's breaker never opened");
    h.advanceLive(10);
  }
  return h;
}

describe("/cluster departedTrust", () => {
  it("lists a demoted peer gone from the membership with its record, when it went and its epoch", () => {
    const h = demotedB();
    expect(view(h, "A").cluster(0).departedTrust).toEqual({ total: 0, peers: [] });
    const trust = trustOfB(h);
    h.apply("A", h.node("A").removePeer("B")); // gone from DNS, say
    const wentAt = h.now;
    h.advance(1_500);
    const shown = view(h, "A").cluster(0).departedTrust;
    expect(shown).toEqual({
      total: 1,
      peers: [{ id: "B", trust, goneForMs: h.now - wentAt, epoch: h.node("B").currentEpoch }],
    });
    expect(shown.peers[0]?.trust).toMatchObject({ state: "open", failures: 3, opened: 1 });
    // Back: a member again, with the record it went with; no longer listed.
    expect(h.node("A").addPeer("B")).toBe(true);
    expect(view(h, "A").cluster(0).departedTrust).toEqual({ total: 0, peers: [] });
    expect(trustOfB(h)).toEqual(trust);
  });
});
