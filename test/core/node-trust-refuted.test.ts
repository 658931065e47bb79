/**
 * Peer trust across a SWIM death (gossip "scuttlebutt", mesh.ts + trust.ts): a staller declared dead
 * that refutes it, the same process at a higher incarnation, comes back with its breaker and failure
 * history; so does a member back in a newer epoch (a restart is its own claim), put on probation.
 */
import { describe, expect, it } from "vitest";
import { daemonGossip, type Harness, isType, prompt } from "./node-harness.js";

const trustOfB = (h: Harness) =>
  h
    .node("A")
    .peers()
    .find((p) => p.id === "B")?.trust;
const statusOfB = (h: Harness) =>
  h
    .node("A")
    .meshMembers()
    ?.find((m) => m.id === "B")?.status;

/** Advances `h` live (mesh mail matching `hold` held) until `done`, failing past `limitMs`. */
function until(
  h: Harness,
  done: () => boolean,
  limitMs: number,
  hold?: Parameters<Harness["advanceLive"]>[2],
) {
  for (let t = 0; !done(); t += 10) {
    if (t > limitMs) throw new Error(`not within ${limitMs / 1000} s`);
    h.advanceLive(10, 10, hold);
  }
}

/** B acks A's forwards and never answers them, until A's breaker on it opens. */
function demoteStaller(h: Harness): void {
  for (let i = 1; trustOfB(h)?.state !== "open"; i++) {
    if (i > 10) throw new Error("B's breaker never opened");
    h.client("A", `r${i}`, prompt(1, i + 10));
    h.deliver((m) => m.msg.type === "forward" || m.msg.type === "forward-ack");
    h.drop((m) => m.from === "B" && (m.msg.type === "result" || m.msg.type === "error"));
    until(h, () => h.node("A").stats().fallbacks >= i || trustOfB(h)?.state === "open", 60_000);
    h.drop((m) => m.from === "B");
  }
}

function setup(): Harness {
  const h = daemonGossip(["A", "B"], 250, { trustMaxUnanswered: 3, forwardTimeoutMs: 2_000 });
  demoteStaller(h);
  return h;
}

describe("peer trust across a SWIM death (gossip scuttlebutt)", () => {
  it("a staller declared dead that refutes it keeps its open breaker and failure history", () => {
    const h = setup();
    const before = trustOfB(h);
    expect(before).toMatchObject({ state: "open", opened: 1 });
    // Its mesh replies to A are lost (it is slow to answer pings) until A declares it dead.
    const incarnation =
      h
        .node("A")
        .meshMembers()
        ?.find((m) => m.id === "B")?.incarnation ?? 0;
    until(
      h,
      () => statusOfB(h) === "dead",
      120_000,
      (m) => m.from === "B" && m.to === "A",
    );
    expect(trustOfB(h)).toBeUndefined(); // no member: not routed to
    // What it will come back with, shown while it is out (/cluster departedTrust).
    expect(h.node("A").departedTrust(10).peers).toEqual([
      { id: "B", trust: before, goneForMs: expect.any(Number), epoch: h.node("B").currentEpoch },
    ]);
    until(h, () => statusOfB(h) === "alive", 120_000);
    const back = h
      .node("A")
      .meshMembers()
      ?.find((m) => m.id === "B");
    expect(back?.incarnation).toBeGreaterThan(incarnation); // it refuted: the same process
    h.advanceLive(1_000); // its digests reach A: the same epoch as before it died
    expect(trustOfB(h)).toMatchObject({ state: "open", opened: 1, failures: before?.failures });
    expect(trustOfB(h)?.score).toBeCloseTo(before?.score ?? 1);
    // Not routable until its open period ends (it half-opens then, for one probe).
    h.drop(() => true);
    h.client("A", "after", prompt(1, 99));
    expect(h.mailbox.filter((m) => m.msg.type === "forward" && m.to === "B")).toHaveLength(0);
  });

  it("a member back in a newer epoch (it restarted while dead) keeps its distrust", () => {
    const h = setup();
    const before = trustOfB(h);
    h.crash("B");
    until(h, () => statusOfB(h) === "dead", 120_000);
    h.restart("B");
    until(h, () => statusOfB(h) === "alive" && h.node("A").heldOf("B") !== undefined, 120_000);
    h.deliver(isType("snapshot"));
    // Epochs are self-reported: a staller could claim restarts at will to shed its record.
    expect(trustOfB(h)).toMatchObject({ state: "open", opened: 1, failures: before?.failures });
  });
});
