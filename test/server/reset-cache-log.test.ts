/**
 * `POST /admin/reset-cache` under `--gossip scuttlebutt`: the reset starts the node's SWIM list over
 * (a crash-restart's), so every member leaves it and comes back. The log says so in one line on the
 * node that reset, not a leave and a join per member; each of its peers says once that it reset.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { expect, it } from "vitest";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { waitFor } from "../e2e/helpers.js";

type Node = Awaited<ReturnType<typeof startNode>>;

const secretFile = join(mkdtempSync(join(tmpdir(), "pm-reset-log-")), "secret");
const settings = (o: Record<string, unknown>) =>
  resolveNodeSettings(
    {
      engine: "sim",
      logLevel: "silent",
      listen: "127.0.0.1:0",
      peerListen: "127.0.0.1:0",
      gossip: "scuttlebutt",
      secretFile,
      ...o,
    },
    {},
  );

function recording(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: "info" }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  return { logger, lines };
}

const holds = (n: Node, ids: string[]) => {
  const peers = (n.runtime.clusterView() as { peers: { id: string; liveness?: string }[] }).peers;
  return ids.every((id) => peers.some((p) => p.id === id && p.liveness !== "down"));
};
/** Whether `n` has had a state of `id`'s own (its served count rides on them): it knows `id`'s epoch. */
const heardFrom = (n: Node, id: string) =>
  (n.runtime.clusterView() as { peers: { id: string; served: number | null }[] }).peers.some(
    (p) => p.id === id && p.served !== null,
  );
const membership = (lines: Record<string, unknown>[]) =>
  lines.filter((l) => /^member (joined|left) the mesh/.test(String(l.msg)));

it("a cache reset is one line on the node that reset, not a leave and a join per member", async () => {
  writeFileSync(secretFile, "cd".repeat(32), { mode: 0o600 });
  const logs = { A: recording(), B: recording(), C: recording() };
  const nodes: Node[] = [];
  try {
    const a = await startNode(settings({ id: "A" }), { logger: logs.A.logger });
    nodes.push(a);
    const seed = new URL(a.peerUrl).host;
    for (const id of ["B", "C"] as const)
      nodes.push(await startNode(settings({ id, join: seed }), { logger: logs[id].logger }));
    const [, b, c] = nodes as [Node, Node, Node];
    await waitFor(
      () =>
        holds(a, ["B", "C"]) &&
        holds(b, ["A", "C"]) &&
        holds(c, ["A", "B"]) &&
        heardFrom(b, "A") &&
        heardFrom(c, "A"),
      30_000,
      "a mesh of three",
    );
    const before = { A: logs.A.lines.length, B: logs.B.lines.length, C: logs.C.lines.length };

    const res = await fetch(`${a.apiUrl}/admin/reset-cache`, { method: "POST" });
    expect(res.status).toBe(200);
    const after = (id: "A" | "B" | "C") => logs[id].lines.slice(before[id]);
    await waitFor(
      () => after("A").some((l) => l.msg === "cache reset: every member rejoined"),
      30_000,
      "A to say its members are back",
    );
    await waitFor(() => holds(a, ["B", "C"]), 30_000, "A holding B and C again");

    expect(after("A").filter((l) => l.msg === "cache reset: new epoch")).toHaveLength(1);
    expect(
      after("A").find((l) => String(l.msg).startsWith("cache reset: membership starts over")),
    ).toMatchObject({
      members: 2,
    });
    expect(after("A").find((l) => l.msg === "cache reset: every member rejoined")).toMatchObject({
      members: 2,
    });
    // Each peer says it once, as soon as A's new epoch reaches it.
    const restarted = (id: "B" | "C") =>
      after(id).filter((l) => l.msg === "member reset its cache or restarted (a new epoch)");
    await waitFor(() => restarted("B").length > 0 && restarted("C").length > 0, 30_000, "B and C to see it");
    for (const id of ["B", "C"] as const)
      expect(restarted(id)).toEqual([expect.objectContaining({ peer: "A" })]);
    // No member is said to leave or join on the node that reset, nor on its peers.
    expect(membership(after("A"))).toEqual([]);
    expect(membership(after("B"))).toEqual([]);
    expect(membership(after("C"))).toEqual([]);
  } finally {
    await Promise.all(nodes.map((n) => n.stop()));
  }
}, 90_000);
