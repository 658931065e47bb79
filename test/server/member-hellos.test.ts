/**
 * MeshPeers with fakes: a member back with no verification in hand (SWIM verifies one back from dead
 * or left; the transport does not count on it) is noted again with its last verified hello at once,
 * then with a fresh one once that is proven and checked (member-hellos.ts); a fresh one refused or
 * unanswered leaves the last one; a hello is forgotten with its member, and nothing is noted after stop().
 * A live member's new life that SWIM has verified has the verification's hello noted, read once.
 */
import { describe, expect, it } from "vitest";
import type { NodeInput } from "../../src/core/node/types.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import type { PeerHello } from "../../src/net/wire-schemas.js";
import type { NodeMetrics } from "../../src/server/metrics.js";
import type { Admin, HelloNews } from "../../src/server/runtime/admin.js";
import { MeshPeers } from "../../src/server/runtime/mesh-peers.js";
import { fakePeerClient, fakeSwimNode, warningLogger } from "./mesh-fakes.js";

const hello = (models: string[], cluster = "c"): PeerHello => ({
  id: "B",
  cluster,
  model: models[0] as string,
  models,
  protocol: PROTOCOL_VERSION,
  minProtocol: PROTOCOL_VERSION,
  gossip: "scuttlebutt",
  promptText: false,
});

/** A's MeshPeers; B's status at SWIM is `set`, each hello B answers is the next of `answers`. */
function fakes() {
  let status: string | undefined;
  let incarnation = 1;
  const answers: (() => Promise<unknown>)[] = [];
  let asked = 0;
  const node = fakeSwimNode(() => (status === undefined ? undefined : { id: "B", status, incarnation }));
  const client = fakePeerClient(new Set(), () => {
    asked++;
    return (answers.shift() ?? (() => new Promise(() => {})))();
  });
  /** What each admission and later hello noted of B: the models it said. */
  const noted: (string[] | undefined)[] = [];
  const admin = {
    meshJoined: (_: string, __: string, h: HelloNews) => void noted.push(h.models),
    meshLeft: () => {},
    notePeerHello: (_: string, h: HelloNews) => void noted.push(h.models),
  } as unknown as Admin;
  const { warnings, logger } = warningLogger();
  let mesh: MeshPeers | undefined;
  // The runtime's loop: SWIM admits a verified candidate, then the transport follows.
  const feed = (i: NodeInput) => {
    if (i.type === "member-verified" && i.ok) status = "alive";
    mesh?.syncMembers();
  };
  mesh = new MeshPeers({
    node,
    client,
    admin,
    metrics: { authRejected: { inc() {} } } as unknown as NodeMetrics,
    logger,
    clusterId: "c",
    helloModel: undefined,
    feed,
    maxMessageBytes: 1 << 20,
  });
  const set = (s: string | undefined) => {
    status = s;
    mesh.syncMembers();
  };
  /** B at `inc` at SWIM, its status unchanged (a refuted suspicion; a restart SWIM never saw). */
  const outbid = (inc: number) => {
    incarnation = inc;
    mesh.syncMembers();
  };
  return { mesh, answers, noted, warnings, set, outbid, asked: () => asked };
}

async function until(what: string, cond: () => boolean): Promise<void> {
  for (const t0 = Date.now(); !cond(); ) {
    if (Date.now() - t0 > 10_000) throw new Error(`timed out: ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** B verified (models m1) and admitted. */
async function admitted() {
  const f = fakes();
  f.answers.push(() => Promise.resolve(hello(["m1"])));
  f.mesh.learn("B", "http://127.0.0.1:1", true);
  f.mesh.verify("B");
  await until("B admitted", () => f.noted.length === 1);
  return f;
}

/** B verified (models m1) and admitted, then declared dead. */
async function admittedThenDead() {
  const f = await admitted();
  expect(f.noted).toEqual([["m1"]]);
  f.set("dead");
  return f;
}

/** Every promise callback already due has run (answers here settle within microtasks). */
const settled = () => new Promise((r) => setImmediate(r));

describe("a member back in the mesh without a new verification", () => {
  it("is noted with its last hello at once, then with its fresh one", async () => {
    const f = await admittedThenDead();
    f.answers.push(() => Promise.resolve(hello(["m2", "m2-lora"])));
    f.set("alive");
    expect(f.noted).toEqual([["m1"], ["m1"]]);
    await until("its fresh hello noted", () => f.noted.length === 3);
    expect(f.noted[2]).toEqual(["m2", "m2-lora"]);
    // The fresh one is now the one remembered.
    f.set("dead");
    f.set("alive");
    expect(f.noted[3]).toEqual(["m2", "m2-lora"]);
    f.mesh.stop();
  });

  it("keeps its last hello when the fresh one is refused or unanswered, and says so", async () => {
    const f = await admittedThenDead();
    f.answers.push(() => Promise.resolve(hello(["m9"], "another-cluster")));
    f.set("alive");
    await until("the refusal warned of", () => f.warnings.length === 1);
    expect(f.warnings[0]).toContain("another-cluster");
    f.answers.push(() => Promise.reject(new Error("connection refused")));
    f.set("dead");
    f.set("alive");
    await until("the failure warned of", () => f.warnings.length === 2);
    expect(f.warnings[1]).toContain("no fresh hello");
    expect(f.noted).toEqual([["m1"], ["m1"], ["m1"]]);
    f.mesh.stop();
  });

  it("notes nothing after stop()", async () => {
    const f = await admittedThenDead();
    let answer: (h: PeerHello) => void = () => {};
    f.answers.push(() => new Promise((r) => (answer = r)));
    f.set("alive");
    expect(f.asked()).toBe(2);
    f.mesh.stop();
    answer(hello(["m2"]));
    await settled();
    expect(f.noted).toEqual([["m1"], ["m1"]]);
    expect(f.warnings).toEqual([]);
  });

  it("is forgotten once SWIM forgets the member: nothing to note if it comes back so", async () => {
    const f = await admittedThenDead();
    f.set(undefined); // its tombstone dropped
    f.set("alive");
    expect(f.noted).toEqual([["m1"], undefined]);
    f.mesh.stop();
  });
});

describe("a fresh hello that arrives late", () => {
  /** B back (unverified) with its fresh hello in flight: `answer` settles it. */
  async function backAsked() {
    const f = await admittedThenDead();
    let answer: (h: PeerHello) => void = () => {};
    f.answers.push(() => new Promise((r) => (answer = r)));
    f.set("alive");
    expect(f.asked()).toBe(2);
    return { ...f, answer: (h: PeerHello) => answer(h) };
  }

  it("is not noted once the member left and came back meanwhile: it is asked again", async () => {
    const f = await backAsked();
    f.set("dead");
    f.answers.push(() => Promise.resolve(hello(["m3"])));
    f.set("alive"); // back again: the answer in flight may be its previous life's
    // Its previous life's answer comes in now.
    f.answer(hello(["m2"]));
    await until("asked again", () => f.asked() === 3);
    await until("the fresh hello of its new life noted", () => f.noted.length === 4);
    expect(f.noted).toEqual([["m1"], ["m1"], ["m1"], ["m3"]]);
    f.mesh.stop();
  });

  it("does not replace the hello of a verification made after it was asked", async () => {
    const f = await backAsked();
    f.set(undefined); // its tombstone dropped: SWIM verifies it anew
    f.answers.push(() => Promise.resolve(hello(["m3"])));
    f.mesh.verify("B");
    await until("verified afresh and admitted", () => f.noted.length === 3);
    expect(f.noted[2]).toEqual(["m3"]);
    f.answer(hello(["m2"])); // asked before that verification
    await settled();
    expect(f.noted).toHaveLength(3);
    f.set("dead");
    f.set("alive");
    // The verified hello is the one remembered, not the older answer.
    expect(f.noted).toEqual([["m1"], ["m1"], ["m3"], ["m3"]]);
    f.mesh.stop();
  });
});

describe("a member alive at a higher incarnation", () => {
  it("is asked for a fresh hello: it may have restarted within its suspicion time", async () => {
    const f = await admitted();
    f.outbid(1); // the same incarnation: nothing to ask
    expect(f.asked()).toBe(1);
    // One more is a refuted suspicion (a restart outbids its old life by two): no fetch by every member.
    f.outbid(2);
    expect(f.asked()).toBe(1);
    f.answers.push(() => Promise.resolve(hello(["m2"])));
    f.outbid(4);
    expect(f.asked()).toBe(2);
    await until("its fresh hello noted", () => f.noted.length === 2);
    expect(f.noted).toEqual([["m1"], ["m2"]]);
    f.mesh.stop();
  });

  it("taken down by SWIM to its own word (a forged claim): its restart below the claim is asked", async () => {
    const f = await admitted();
    f.answers.push(() => Promise.resolve(hello(["m2"])));
    f.outbid(900_000); // a relay's forged claim, held until B's check said otherwise
    await until("the claim's hello noted", () => f.noted.length === 2);
    f.outbid(100); // B's own word: lower, nothing to ask
    expect(f.asked()).toBe(2);
    f.answers.push(() => Promise.resolve(hello(["m3"])));
    f.outbid(5_000); // B restarted, below the forged claim
    expect(f.asked()).toBe(3);
    await until("its fresh hello noted", () => f.noted.length === 3);
    expect(f.noted).toEqual([["m1"], ["m2"], ["m3"]]);
    f.mesh.stop();
  });
});

describe("a member's hello read elsewhere (a DNS round's re-check)", () => {
  it("is the one remembered, and is not noted for an id that is no member", async () => {
    const f = await admitted();
    f.mesh.noteHello("B", hello(["m2"]));
    expect(f.noted).toEqual([["m1"], ["m2"]]);
    f.set("dead");
    f.mesh.noteHello("B", hello(["m3"])); // not a member now: nothing noted of it
    f.set("alive"); // back with no verification: what was last read of it, not its first hello
    expect(f.noted).toEqual([["m1"], ["m2"], ["m2"]]);
    f.mesh.stop();
  });
});

describe("a live member's new life checked by SWIM (a restart it never saw as a death)", () => {
  it("has the hello its verification read noted and remembered", async () => {
    const f = await admitted();
    // SWIM asks B's new life to be verified while B stays a member: it now serves m5.
    f.answers.push(() => Promise.resolve(hello(["m5"])));
    f.mesh.verify("B");
    await until("its new hello noted", () => f.noted.length === 2);
    expect(f.noted[1]).toEqual(["m5"]);
    // The one remembered, should it come back with no verification in hand.
    f.set("dead");
    f.set("alive");
    expect(f.noted[2]).toEqual(["m5"]);
    f.mesh.stop();
  });

  it("has its hello read once, by the verification: its higher incarnation asks for no other", async () => {
    const f = await admitted();
    f.answers.push(() => Promise.resolve(hello(["m5"])));
    // The runtime's order: SWIM's verify-member effect, then the members' sync at its new incarnation.
    f.mesh.verify("B");
    f.outbid(5_000);
    await until("its new hello noted", () => f.noted.length === 2);
    await settled();
    expect(f.asked()).toBe(2); // its admission's, then its new life's verification
    expect(f.noted).toEqual([["m1"], ["m5"]]);
    f.mesh.stop();
  });
});
