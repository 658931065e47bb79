/**
 * MeshPeers with fakes: after our cache reset starts SWIM's list over, the members leaving and coming
 * back are logged as one line for the reset, and those not back within its window as one line more.
 */
import { describe, expect, it } from "vitest";
import type { Admin } from "../../src/server/runtime/admin.js";
import { fakePeerClient, fakeSwimNode, meshPeersOver } from "./mesh-fakes.js";

/** A logger keeping every line and an admin keeping every join (whether after a reset), as fakes. */
function recorded() {
  const lines: { level: string; msg: string; fields: Record<string, unknown> }[] = [];
  const log =
    (level: string) =>
    (fields: Record<string, unknown>, msg: string): void =>
      void lines.push({ level, msg, fields });
  const logger = { info: log("info"), warn: log("warn"), error: log("error"), debug: log("debug") };
  const joins: { id: string; afterReset: boolean }[] = [];
  const admin = {
    meshJoined: (id: string, _url: string, _hello: unknown, afterReset = false) =>
      void joins.push({ id, afterReset }),
    meshLeft: () => {},
  } as unknown as Admin;
  return { lines, logger, joins, admin };
}

function fakes() {
  let status: string | undefined;
  let now = 1_000;
  const { lines, logger, joins, admin } = recorded();
  const node = fakeSwimNode(() => (status === undefined ? undefined : { id: "B", status }));
  const mesh = meshPeersOver(
    node,
    fakePeerClient(new Set(), () => new Promise(() => {})),
    admin,
    {
      logger,
      now: () => now,
    },
  );
  mesh.learn("B", "http://127.0.0.1:1", true);
  const info = () => lines.filter((l) => l.level === "info").map((l) => l.msg);
  return {
    mesh,
    joins,
    lines,
    info,
    set: (s: string | undefined) => {
      status = s;
    },
    advance: (ms: number) => {
      now += ms;
    },
    /** B joins, then our cache reset starts SWIM's list over: B is away, not yet back. */
    awayAfterReset: () => {
      status = "alive";
      mesh.syncMembers();
      mesh.newEpoch();
      status = undefined;
      mesh.syncMembers();
    },
  };
}

describe("a cache reset's rejoin", () => {
  it("logs one line for the reset and one when every member is back, none per member", () => {
    const f = fakes();
    f.set("alive");
    f.mesh.syncMembers();
    expect(f.info()).toEqual([]); // joins are logged by the admin, faked here
    f.mesh.newEpoch();
    f.set(undefined); // the fresh SWIM list
    f.mesh.syncMembers();
    f.set("alive");
    f.mesh.syncMembers();
    expect(f.info()).toEqual([
      "cache reset: membership starts over; members not logged as they leave and rejoin",
      "cache reset: every member rejoined",
    ]);
    expect(f.joins).toEqual([
      { id: "B", afterReset: false },
      { id: "B", afterReset: true },
    ]);
    // Gone later, on its own: said as any leave is.
    f.set("dead");
    f.mesh.syncMembers();
    expect(f.info().at(-1)).toBe("member left the mesh (dead or departed)");
    f.mesh.stop();
  });

  it("names the members not back within its window, once", () => {
    const f = fakes();
    f.awayAfterReset();
    expect(f.info()).toHaveLength(1);
    f.advance(60_000);
    f.mesh.syncMembers();
    f.mesh.syncMembers();
    const late = f.lines.filter((l) => l.msg.startsWith("cache reset: members not back"));
    expect(late).toHaveLength(1);
    expect(late[0]?.fields).toMatchObject({ members: 1, missing: 1, peers: ["B"] });
    // Back after all: a join like any other.
    f.set("alive");
    f.mesh.syncMembers();
    expect(f.joins.at(-1)).toEqual({ id: "B", afterReset: false });
    f.mesh.stop();
  });
});

describe("a cache reset's rejoin, the node stopping", () => {
  it("says nothing of members not back once the node stops", () => {
    const f = fakes();
    f.awayAfterReset();
    f.mesh.stop();
    f.advance(60_000);
    f.mesh.syncMembers();
    expect(f.lines.filter((l) => l.msg.startsWith("cache reset: members not back"))).toEqual([]);
  });
});

describe("a second cache reset while members are still away from the first", () => {
  it("still awaits them quietly, and names them if they are not back", () => {
    const alive = new Set<string>();
    let now = 1_000;
    const { lines, logger, joins, admin } = recorded();
    const node = {
      ...fakeSwimNode(() => undefined),
      meshMembers: () => [...alive].map((id) => ({ id, status: "alive" })),
    } as unknown as ReturnType<typeof fakeSwimNode>;
    const mesh = meshPeersOver(
      node,
      fakePeerClient(new Set(), () => new Promise(() => {})),
      admin,
      { logger, now: () => now },
    );
    for (const id of ["B", "C"]) mesh.learn(id, `http://127.0.0.1:${id === "B" ? 1 : 2}`, true);
    const set = (...ids: string[]) => {
      alive.clear();
      for (const id of ids) alive.add(id);
      mesh.syncMembers();
    };
    set("B", "C");
    mesh.newEpoch();
    set(); // both leave with the reset
    set("B"); // B is back, C not yet
    mesh.newEpoch(); // a second reset (a benchmark's next run, say)
    set(); // B leaves with it
    set("B", "C"); // both back
    // C's return is its return after the resets, as B's is: none logged as a plain join.
    expect(joins.slice(2)).toEqual([
      { id: "B", afterReset: true },
      { id: "B", afterReset: true },
      { id: "C", afterReset: true },
    ]);
    const info = lines.filter((l) => l.level === "info").map((l) => l.msg);
    expect(info.at(-1)).toBe("cache reset: every member rejoined");
    expect(info.filter((m) => m === "cache reset: every member rejoined")).toHaveLength(1);

    // Away at the second reset and never back: named when the window ends.
    set("B", "C");
    mesh.newEpoch();
    set();
    set("B");
    mesh.newEpoch();
    set();
    now += 60_000;
    set("B");
    const late = lines.filter((l) => l.msg.startsWith("cache reset: members not back"));
    expect(late).toHaveLength(1);
    expect(late[0]?.fields).toMatchObject({ missing: 1, peers: ["C"] });
    mesh.stop();
  });
});
