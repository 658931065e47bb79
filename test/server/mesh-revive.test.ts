/**
 * gossip scuttlebutt: a member declared dead that refutes it (a higher incarnation, back to alive once
 * verified again) keeps what its hello said: its models on `/v1/models` and `/cluster`, and its
 * prompt-text flag. Two in-process nodes of two models (`--mixed-models`) on loopback; B's death at A
 * is B's own word fed to A's mesh, as a suspicion timing out would leave it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeMesh } from "../../src/net/mesh-wire.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { startPair } from "../node-pair.js";

const PROFILE = ["paper-h100-qwen0.5b", "cpu-llamacpp"] as const;
const M2 = `sim:${PROFILE[1]}`;

interface View {
  peers: { id: string; liveness: string; models: string[]; promptText: boolean }[];
  members: { id: string; status: string; incarnation: number }[];
}
type ModelList = { data: { id: string; nodes?: string[] }[] };

describe("a member declared dead that comes back", () => {
  let a: NodeHandle;
  const nodes: NodeHandle[] = [];
  const view = () => a.runtime.clusterView() as unknown as View;
  const memberB = () => view().members.find((m) => m.id === "B");
  const servesM2 = async () => {
    const l = (await (await fetch(`${a.apiUrl}/v1/models`)).json()) as ModelList;
    return l.data.find((m) => m.id === M2)?.nodes ?? [];
  };

  async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
    for (const t0 = Date.now(); !(await cond()); ) {
      if (Date.now() - t0 > ms) throw new Error(`timed out: ${what}\n${JSON.stringify(view())}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  beforeAll(async () => {
    nodes.push(
      ...(await startPair((i) => ({
        engine: "sim",
        simProfile: PROFILE[i],
        simTimeScale: "0.02",
        mixedModels: true,
        calibrationMs: "0",
      }))),
    );
    a = nodes[0] as NodeHandle;
    await until("A to know B's model", async () => (await servesM2()).includes("B"));
  }, 30_000);
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  });

  it("keeps its models and prompt-text flag once alive again at a higher incarnation", async () => {
    const before = memberB();
    expect(before?.status).toBe("alive");
    const promptText = view().peers.find((p) => p.id === "B")?.promptText;
    // B's own word that it is dead, as A's suspicion of it timing out would leave it.
    const dead = encodeMesh(
      {
        channel: "swim",
        msg: {
          type: "gossip",
          updates: [{ id: "B", status: "dead", incarnation: before?.incarnation ?? 0 }],
        },
      },
      [],
    );
    expect(a.runtime.mesh?.onMesh("B", dead)).toBeUndefined();
    // Read at once, in process: B may refute its death as soon as it next hears from A.
    expect(memberB()?.status).toBe("dead");
    expect(a.runtime.meshModels().find((m) => m.id === M2)?.nodes ?? []).toEqual([]);
    // B hears of its death on its next ping of A and refutes it; A takes it back once it passes the check
    // again.
    await until(
      "B alive again at A, at a higher incarnation",
      () => memberB()?.status === "alive" && (memberB()?.incarnation ?? 0) > (before?.incarnation ?? 0),
    );
    expect(await servesM2()).toEqual(["B"]);
    const b = view().peers.find((p) => p.id === "B");
    expect(b?.models).toEqual([M2]);
    expect(b?.promptText).toBe(promptText);
  }, 30_000);
});
