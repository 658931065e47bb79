/**
 * Pools to non-members stay within MAX_STRANGER_POOLS without locking new strangers out: at the bound
 * the pool used longest ago makes room, unless it carries a verification or a left member's hold.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { PeerClient } from "../../src/net/transport-client.js";
import { MAX_STRANGER_POOLS, StrangerPools } from "../../src/server/runtime/stranger-pools.js";

/** A TEST DOUBLE of the transport client: only the pools it holds. */
function poolsDouble() {
  const open = new Set<string>();
  const client = {
    has: (id: string) => open.has(id),
    setPeer: (id: string) => void open.add(id),
    removePeer: (id: string) => void open.delete(id),
  } as unknown as PeerClient;
  return { open, client };
}

const made: StrangerPools[] = [];
afterEach(() => {
  for (const p of made.splice(0)) p.stop();
});

function strangerPools(
  verifying = new Set<string>(),
  members = new Set<string>(),
  sending = new Set<string>(),
) {
  const d = poolsDouble();
  const pools = new StrangerPools({
    client: d.client,
    url: (id) => `http://127.0.0.1:1/${id}`,
    isMember: (id) => members.has(id),
    isVerifying: (id) => verifying.has(id),
    isSending: (id) => sending.has(id),
  });
  made.push(pools);
  return { ...d, pools };
}

const ids = (n: number, tag = "s") => Array.from({ length: n }, (_, i) => `${tag}${i}`);

describe("stranger pools", () => {
  it("at the bound, close the pool used longest ago to let a new stranger in", () => {
    const { open, pools } = strangerPools();
    for (const id of ids(MAX_STRANGER_POOLS)) expect(pools.pool(id)).toBe(true);
    expect(pools.pool("s0")).toBe(true); // used again: s1 is now the one used longest ago
    expect(pools.pool("joiner")).toBe(true);
    expect(open.has("joiner")).toBe(true);
    expect(open.has("s1")).toBe(false);
    expect(open.has("s0")).toBe(true);
    expect(open.size).toBe(MAX_STRANGER_POOLS);
  });

  it("never close one carrying a verification or a left member's hold; refuse when all do", () => {
    const verifying = new Set(ids(MAX_STRANGER_POOLS - 1));
    const members = new Set(["left"]);
    const { open, pools } = strangerPools(verifying, members);
    expect(pools.pool("left")).toBe(true); // a member's pool: not counted
    for (const id of verifying) expect(pools.pool(id)).toBe(true);
    members.delete("left");
    expect(pools.keepLeftPool("left")).toBe(true);
    expect(pools.pool("joiner")).toBe(false);
    expect(open.has("joiner")).toBe(false);
    // One verification ends (refused, say): its pool may make room now.
    verifying.delete("s5");
    expect(pools.pool("joiner")).toBe(true);
    expect(open.has("s5")).toBe(false);
    expect(open.has("left")).toBe(true);
  });

  it("never close one carrying a message still on its way (a join, its ack, a push-pull)", () => {
    const sending = new Set(["s0"]);
    const { open, pools } = strangerPools(new Set(), new Set(), sending);
    for (const id of ids(MAX_STRANGER_POOLS)) expect(pools.pool(id)).toBe(true);
    // s0, used longest ago, still carries a message: closing its pool would abort it.
    expect(pools.pool("joiner")).toBe(true);
    expect(open.has("s0")).toBe(true);
    expect(open.has("s1")).toBe(false);
    expect(open.size).toBe(MAX_STRANGER_POOLS);
  });

  it("count members' pools apart: a member never makes room nor needs it", () => {
    const members = new Set(ids(3, "m"));
    const { open, pools } = strangerPools(new Set(), members);
    for (const id of ids(MAX_STRANGER_POOLS)) pools.pool(id);
    for (const id of members) expect(pools.pool(id)).toBe(true);
    expect(open.size).toBe(MAX_STRANGER_POOLS + 3);
    expect(pools.pool("joiner")).toBe(true);
    for (const id of members) expect(open.has(id)).toBe(true);
  });
});
