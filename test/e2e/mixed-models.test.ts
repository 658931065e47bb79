/**
 * A mesh of mixed models in real processes: four sim-engine nodes on 127.0.0.1, two models (two sim
 * cost profiles, so two model ids), two nodes each, `--mixed-models`. A request for either model,
 * entering at any node, is served by a node of that model; `/v1/models` at any node lists both with
 * their nodes; a model nobody serves is 404 `model_not_found`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { postCompletion } from "../api-client.js";
import { waitFor } from "./helpers.js";
import { type SimNodes, startSimNodes } from "./sim-nodes.js";

const PROFILE: Record<string, string> = {
  A: "paper-h100-qwen0.5b",
  B: "paper-h100-qwen0.5b",
  C: "cpu-llamacpp",
  D: "cpu-llamacpp",
};
const M1 = "sim:paper-h100-qwen0.5b";
const M2 = "sim:cpu-llamacpp";
const SERVES: Record<string, string[]> = { [M1]: ["A", "B"], [M2]: ["C", "D"] };

type ModelList = { data: { id: string; nodes?: string[] }[] };
type ClusterPeers = {
  peers: { id: string; liveness: string; models?: string[] }[];
  members?: { id: string; status: string; incarnation: number }[];
};

/** Lines of each process's output kept in a failure's message. */
const TAIL_LINES = 30;

/**
 * What each node knows, for a set-up that timed out: its `/v1/models`, its `/cluster` peers (and
 * SWIM's members), the tail of its output. Each read bounded, so the message comes within the hook.
 */
async function nodesState(nodes: SimNodes): Promise<string> {
  const read = async (url: string, pick: (body: unknown) => unknown) => {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      return JSON.stringify(pick(await res.json()));
    } catch (err) {
      return `unread: ${(err as Error).message}`;
    }
  };
  const each = await Promise.all(
    nodes.ids.map(async (id, i) => {
      const api = nodes.api[i] as string;
      const [models, cluster] = await Promise.all([
        read(`${api}/v1/models`, (b) => (b as ModelList).data.map((m) => ({ id: m.id, nodes: m.nodes }))),
        read(`${api}/cluster`, (b) => {
          const c = b as ClusterPeers;
          return {
            peers: c.peers.map((p) => ({ id: p.id, liveness: p.liveness, models: p.models })),
            members: c.members,
          };
        }),
      ]);
      const tail = (nodes.procs[i]?.output() ?? "").trimEnd().split("\n").slice(-TAIL_LINES).join("\n");
      return `--- node ${id}\n/v1/models: ${models}\n/cluster: ${cluster}\noutput (tail):\n${tail}`;
    }),
  );
  return each.join("\n");
}

/** `wait`, its time-out's message followed by every node's state (nodesState). */
async function explained(nodes: SimNodes, wait: Promise<void>): Promise<void> {
  try {
    await wait;
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${await nodesState(nodes)}`);
  }
}

describe("four node processes serving two models", () => {
  let nodes: SimNodes;
  const models = async (i: number) => (await (await fetch(`${nodes.api[i]}/v1/models`)).json()) as ModelList;

  beforeAll(async () => {
    nodes = await startSimNodes(["A", "B", "C", "D"], (id) => [
      ...["--mixed-models", "--sim-profile", PROFILE[id] as string],
    ]);
    // Every node has every peer's hello (its models) once each lists both models with two nodes each.
    await explained(
      nodes,
      waitFor(
        async () =>
          (await Promise.all(nodes.api.map((_, i) => models(i)))).every(
            (l) => l.data.filter((m) => (m.nodes?.length ?? 0) === 2).length === 2,
          ),
        30_000,
        "every node to know every peer's models",
      ),
    );
    // A peer is routed to only while live with an estimate: wait until every node sees all three so.
    const cluster = async (u: string) => (await (await fetch(`${u}/cluster`)).json()) as ClusterPeers;
    await explained(
      nodes,
      waitFor(
        async () =>
          (await Promise.all(nodes.api.map((u) => cluster(u)))).every(
            (c) => c.peers.length === 3 && c.peers.every((p) => p.liveness === "live"),
          ),
        30_000,
        "every node to see every peer live",
      ),
    );
  }, 120_000);
  afterAll(async () => {
    nodes?.procs[3]?.child.kill("SIGCONT"); // the last test's frozen node, should it fail midway
    await nodes?.stop();
  });

  it("lists both models, each with the nodes serving it, at every node; the node's own first", async () => {
    for (const [i, id] of nodes.ids.entries()) {
      const l = await models(i);
      expect(l.data[0]?.id).toBe(PROFILE[id] === PROFILE.A ? M1 : M2);
      const byId = Object.fromEntries(l.data.map((m) => [m.id, [...(m.nodes ?? [])].sort()]));
      expect(byId).toEqual(SERVES);
    }
  });

  it("serves a request for either model, entering at any node, on a node of that model", async () => {
    let q = 0;
    for (const [i, id] of nodes.ids.entries())
      for (const model of [M1, M2]) {
        for (const stream of [false, true]) {
          const res = await postCompletion(nodes.api[i] as string, {
            model,
            prompt: `question ${++q} for ${model} entering at ${id}`,
            max_tokens: 2,
            stream,
          });
          expect(res.status, await res.clone().text()).toBe(200);
          const by = res.headers.get("x-prefixmesh-served-by") as string;
          expect(SERVES[model], `${model} entering at ${id} served by ${by}`).toContain(by);
          if (!stream) expect(((await res.json()) as { model: string }).model).toBe(model);
          else expect(await res.text()).toContain("[DONE]");
        }
      }
  });

  it("shows each peer's advertised models on /cluster", async () => {
    const v = (await (await fetch(`${nodes.api[0]}/cluster`)).json()) as {
      peers: { id: string; models: string[] }[];
    };
    expect(Object.fromEntries(v.peers.map((p) => [p.id, p.models]))).toEqual({ B: [M1], C: [M2], D: [M2] });
  });

  it("answers 404 model_not_found for a model no node serves, at every node", async () => {
    for (const api of nodes.api) {
      const res = await postCompletion(api, { model: "no-such-model", prompt: "hi", max_tokens: 1 });
      expect(res.status).toBe(404);
      const body = (await res.json()) as { error: { code: string; type: string; param: string } };
      expect(body.error).toMatchObject({
        code: "model_not_found",
        type: "invalid_request_error",
        param: "model",
      });
    }
  });

  // Last: it freezes a node. A member SWIM declares dead that then refutes it is taken back without a
  // new verification; what its hello said (its models) must come back with it (member-hellos.ts).
  it("lists a node's models again once it comes back from being declared dead", async () => {
    const frozen = nodes.procs[3];
    frozen?.child.kill("SIGSTOP");
    const downAtA = async () =>
      ((await (await fetch(`${nodes.api[0]}/cluster`)).json()) as ClusterPeers).peers.find(
        (p) => p.id === "D",
      )?.liveness === "down";
    await waitFor(downAtA, 60_000, "A to take the frozen D for down");
    expect(Object.fromEntries((await models(0)).data.map((m) => [m.id, m.nodes]))).toEqual({
      [M1]: ["A", "B"],
      [M2]: ["C"],
    });
    frozen?.child.kill("SIGCONT");
    await waitFor(
      async () => {
        const byId = Object.fromEntries(
          (await models(0)).data.map((m) => [m.id, [...(m.nodes ?? [])].sort()]),
        );
        return JSON.stringify(byId) === JSON.stringify(SERVES);
      },
      30_000,
      "A to list D's model again",
    );
  }, 120_000);
});
