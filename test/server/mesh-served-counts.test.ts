/**
 * MeshPeers with fakes: a member's served count (peer-served.ts, shown on /cluster) is kept while SWIM
 * remembers the member — declared dead, it is shown down with its count, and refuting its death (the
 * same process and epoch) it counts on — and goes once SWIM forgets it, so members that come and go
 * never fill the bound and stop newcomers being counted.
 */
import { describe, expect, it } from "vitest";
import type { Admin } from "../../src/server/runtime/admin.js";
import { MAX_COUNTED_PEERS, PeerServedCounts } from "../../src/server/runtime/peer-served.js";
import { fakePeerClient, fakeSwimNode, meshPeersOver } from "./mesh-fakes.js";

function fakes() {
  let status: string | undefined;
  const counts = new PeerServedCounts();
  const node = fakeSwimNode(() => (status === undefined ? undefined : { id: "B", status }));
  const client = fakePeerClient(new Set(), () => new Promise(() => {}));
  const admin = { meshJoined: () => {}, meshLeft: () => {} } as unknown as Admin;
  const mesh = meshPeersOver(node, client, admin, {
    served: {
      own: () => 0,
      report: (from, epoch, n) => counts.report(from, epoch, n),
      keepOnly: (remembered) => counts.keepOnly(remembered),
    },
  });
  const sync = (s: string | undefined) => {
    status = s;
    mesh.syncMembers();
  };
  return { mesh, counts, sync };
}

describe("a member's served count under gossip scuttlebutt", () => {
  it("is kept while SWIM remembers it dead, counts on when it refutes, goes when SWIM forgets it", () => {
    const { mesh, counts, sync } = fakes();
    mesh.learn("B", "http://127.0.0.1:1", true);
    sync("alive");
    counts.report("B", 7, 5);
    sync("dead");
    expect(counts.of("B")).toBe(5); // shown down, with what it served
    sync("alive"); // refuted: the same epoch, whose counter only grows
    expect(counts.of("B")).toBe(5);
    counts.report("B", 7, 6);
    expect(counts.of("B")).toBe(6);
    sync("dead");
    sync(undefined); // SWIM forgot it
    expect(counts.of("B")).toBeNull();
    mesh.stop();
  });

  it("members that came and went never keep newcomers from being counted", () => {
    const { mesh, counts, sync } = fakes();
    for (let i = 0; i < MAX_COUNTED_PEERS; i++) counts.report(`gone${i}`, 1, i);
    sync(undefined);
    counts.report("B", 1, 3);
    expect(counts.of("B")).toBe(3);
    mesh.stop();
  });
});

describe("PeerServedCounts.keepOnly", () => {
  it("drops the counts of those not remembered, keeps the rest", () => {
    const c = new PeerServedCounts();
    c.report("B", 1, 2);
    c.report("C", 1, 3);
    c.keepOnly(new Set(["B", "A"]));
    expect(c.of("B")).toBe(2);
    c.keepOnly(new Set(["A"]));
    expect(c.of("B")).toBeNull();
    expect(c.of("C")).toBeNull();
  });

  // SWIM may remember as many members as the counts keep (maxMembers 4,096 by default, up to 100,000):
  // a count no fewer than those remembered may still hold some forgotten, which must not keep a
  // newcomer's count out for good.
  it("a count refused at the bound makes room from those forgotten, however many are remembered", () => {
    const c = new PeerServedCounts();
    for (let i = 0; i < MAX_COUNTED_PEERS; i++) c.report(`n${i}`, 1, i);
    const remembered = new Set<string>();
    for (let i = 1; i <= MAX_COUNTED_PEERS; i++) remembered.add(`n${i}`); // n0 forgotten, n4096 new
    c.keepOnly(remembered);
    c.report(`n${MAX_COUNTED_PEERS}`, 1, 7); // refused: the bound is full
    c.keepOnly(remembered);
    c.report(`n${MAX_COUNTED_PEERS}`, 1, 8);
    expect(c.of(`n${MAX_COUNTED_PEERS}`)).toBe(8);
    expect(c.of("n0")).toBeNull();
    expect(c.of("n1")).toBe(1);
  });
});
