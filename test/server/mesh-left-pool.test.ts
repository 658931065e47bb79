/**
 * MeshPeers with fakes: a member that left keeps its pool LEFT_POOL_MS for its final cancels, and
 * that keeping ends when it comes back, so it never closes a pool made later for another reason.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Admin } from "../../src/server/runtime/admin.js";
import { LEFT_POOL_MS } from "../../src/server/runtime/stranger-pools.js";
import { fakePeerClient, fakeSwimNode, meshPeersOver } from "./mesh-fakes.js";

afterEach(() => {
  vi.useRealTimers();
});

function fakes() {
  let status: string | undefined;
  const pools = new Set<string>();
  const node = fakeSwimNode(() => (status === undefined ? undefined : { id: "B", status }));
  let hellos = 0;
  // A verification that takes its time: its pool must stay meanwhile.
  const client = fakePeerClient(pools, () => {
    hellos++;
    return new Promise(() => {});
  });
  const admin = {
    meshJoined: (id: string) => void pools.add(id),
    meshLeft: (id: string, keepPool = false) => {
      if (!keepPool) pools.delete(id);
    },
  } as unknown as Admin;
  const mesh = meshPeersOver(node, client, admin);
  return {
    mesh,
    pools,
    set: (s: string | undefined) => {
      status = s;
    },
    hellos: () => hellos,
  };
}

/** Fake timers, and B a member at its first address that has just left: its pool kept. */
function leftAndKept(): ReturnType<typeof fakes> {
  vi.useFakeTimers();
  const f = fakes();
  f.mesh.learn("B", "http://127.0.0.1:1", true);
  f.set("alive");
  f.mesh.syncMembers();
  f.set("left");
  f.mesh.syncMembers();
  return f;
}

describe("a member that left: its pool", () => {
  it("is kept LEFT_POOL_MS, then closed", () => {
    const { mesh, pools } = leftAndKept();
    expect(pools.has("B")).toBe(true);
    vi.advanceTimersByTime(LEFT_POOL_MS);
    expect(pools.has("B")).toBe(false);
    mesh.stop();
  });

  it("once it came back, its old keeping never closes a pool made later (a verification's)", () => {
    const { mesh, pools, set } = leftAndKept(); // kept for LEFT_POOL_MS
    set("alive");
    mesh.syncMembers(); // back (restarted): a member again
    vi.advanceTimersByTime(LEFT_POOL_MS / 4);
    set("dead");
    mesh.syncMembers(); // gone for good this time: its pool closes
    expect(pools.has("B")).toBe(false);
    set(undefined);
    mesh.verify("B"); // named again: a stranger's pool while it proves its id
    expect(pools.has("B")).toBe(true);
    vi.advanceTimersByTime(LEFT_POOL_MS);
    expect(pools.has("B")).toBe(true);
    mesh.stop();
  });

  it("is not closed by its leave's timer once its id is being verified again (a restart)", () => {
    const { mesh, pools, set, hellos } = leftAndKept(); // kept for LEFT_POOL_MS
    vi.advanceTimersByTime(LEFT_POOL_MS / 2);
    set(undefined); // restarted: SWIM names it again and asks for its verification
    const read = hellos(); // (its admission above, with no verification, asked for one too)
    mesh.verify("B");
    expect(hellos()).toBe(read + 1); // on the kept pool
    vi.advanceTimersByTime(LEFT_POOL_MS);
    // Its hello is still in flight on that pool: closing it would fail the verification.
    expect(pools.has("B")).toBe(true);
    set("alive");
    mesh.syncMembers(); // verified and admitted: a member's pool
    vi.advanceTimersByTime(LEFT_POOL_MS);
    expect(pools.has("B")).toBe(true);
    mesh.stop();
  });

  it("is no longer the kept one once the id's pool is made again at a new address", () => {
    const { mesh, pools, set } = leftAndKept(); // kept for LEFT_POOL_MS
    set(undefined);
    mesh.learn("B", "http://127.0.0.1:2", true); // restarted elsewhere, said by itself: a new pool
    vi.advanceTimersByTime(LEFT_POOL_MS);
    expect(pools.has("B")).toBe(true);
    mesh.stop();
  });
});
