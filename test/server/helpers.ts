import pino from "pino";
import { afterEach } from "vitest";
import type { Engine } from "../../src/core/engine.js";
import { DEFAULT_PROFILE, resolveProfile } from "../../src/engines/sim/profiles.js";
import { SimEngine } from "../../src/engines/sim/sim-engine.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { ClusterView } from "../../src/server/runtime/cluster-view.js";
import { type NodeHandle, startNode } from "../../src/server/runtime/start-node.js";
import { type NodeSettings, resolveNodeSettings } from "../../src/server/settings/index.js";
import { modelOf, postCompletion } from "../api-client.js";
import type { Harness } from "../core/node-harness.js";
import { startPair } from "../node-pair.js";

type Settings = Record<string, unknown>;

/**
 * Two in-process nodes A and B peered with each other (insecure, loopback), the simulated engine
 * time-scaled unless `engines` gives others, fast anti-entropy; `extra` overrides node settings,
 * `own` one node's.
 */
export async function pair(
  extra: Settings,
  engines: { A?: Engine; B?: Engine } = {},
  own: { A?: Settings; B?: Settings } = {},
) {
  const common = { engine: "sim", pollMs: "50", simTimeScale: "0.02", ...extra };
  return startPair((i) => ({ ...common, ...(i === 0 ? own.A : own.B) }), [engines.A, engines.B]);
}

/**
 * A and B with mixed models, A running `engine`: B's forwards are tokenized again at A, their steps
 * bounded (`--tokenize-timeout-ms`) far past any test. `own`: one node's own settings.
 */
export function mixedPair(engine: Engine, own: { A?: Settings; B?: Settings } = {}) {
  return pair({ simTimeScale: "0.001", mixedModels: true, tokenizeTimeoutMs: "600000" }, { A: engine }, own);
}

/** Test-only engine: the simulator's at the default cost profile, a thousand times faster. */
export class TestSimEngine extends SimEngine {
  constructor() {
    super({ profile: resolveProfile(DEFAULT_PROFILE), timeScale: 0.001 });
  }
}

/** A's view of its peer B on `GET /cluster` (the fields these tests read). */
export interface PeerRow {
  estimateTokens: number;
  promptText: boolean;
}

/**
 * A and B (policy affinity unless `extra` says otherwise) where B has served `prefix` (≥ 256 tokens)
 * and A's estimate shows it — and `ready(A's view of B)` holds, if given — so A forwards prompts that
 * start with the prefix to B. `onStart` gets both nodes at once, for the caller to stop them.
 */
export async function routedPair(
  prefix: string,
  engines: { A?: Engine; B?: Engine },
  o: {
    extra?: Settings;
    /** One node's own settings (`pair`'s `own`). */
    own?: { A?: Settings; B?: Settings };
    ready?: (b: PeerRow) => boolean;
    onStart: (a: NodeHandle, b: NodeHandle) => void;
  },
) {
  const [a, b] = await pair({ policy: "affinity", ...o.extra }, engines, o.own);
  o.onStart(a, b);
  const model = await modelOf(b.apiUrl);
  await postCompletion(b.apiUrl, { model, prompt: `${prefix} warm`, max_tokens: 1 });
  // Generous: gossip on a busy machine can take seconds.
  for (const deadline = Date.now() + 15_000; ; ) {
    const v = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as { peers: PeerRow[] };
    const p = v.peers[0];
    if (p && p.estimateTokens >= 256 && (o.ready?.(p) ?? true)) break;
    if (Date.now() > deadline) throw new Error(`A never learned B's tree: ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return { a, b, model };
}

/**
 * One node "A" alone on 127.0.0.1 (ports 0, no calibration, silent), running `engine` (else the sim
 * engine); `extra` overrides node settings. Stopped again if its model cannot be read.
 */
export async function soloNode(engine?: Engine, extra: Record<string, unknown> = {}) {
  const settings = resolveNodeSettings(
    {
      id: "A",
      engine: "sim",
      logLevel: "silent",
      listen: "127.0.0.1:0",
      peerListen: "127.0.0.1:0",
      calibrationMs: 0,
      ...extra,
    },
    {},
  );
  const node = await startNode(settings, {
    logger: pino({ level: "silent" }),
    ...(engine ? { engine } : {}),
  });
  try {
    return { node, model: await modelOf(node.apiUrl) };
  } catch (err) {
    await node.stop();
    throw err;
  }
}

/**
 * Settings of one node "A" on two free 127.0.0.1 ports (API and peer), insecure and silent: the set-up
 * of a test that starts a single node with `startNode`. `overrides` win over every default; `env` is
 * the environment the settings read (none of the process's).
 */
export async function loopbackNodeSettings(
  overrides: Record<string, unknown> = {},
  env: NodeJS.ProcessEnv = {},
): Promise<NodeSettings> {
  const [api, peer] = await Promise.all([freePort("127.0.0.1"), freePort("127.0.0.1")]);
  return resolveNodeSettings(
    {
      id: "A",
      insecure: true,
      logLevel: "silent",
      listen: `127.0.0.1:${api}`,
      peerListen: `127.0.0.1:${peer}`,
      ...overrides,
    },
    env,
  );
}

/**
 * The `/cluster` view of node `id` in the core harness `h`, on its clock, over a stand-in engine of
 * `capacityTokens` (model "m"; the view reads only its info), single protocol, no peer URLs.
 */
export function harnessClusterView(h: Harness, id: string, capacityTokens: number): ClusterView {
  const engine = { info: { model: "m", kind: "sim", capacityTokens } } as unknown as Engine;
  return new ClusterView({
    node: h.node(id),
    engine,
    clusterId: "c",
    protocols: { min: 1, max: 1 },
    now: () => h.now,
    peerUrl: () => undefined,
    sendsPromptText: () => true,
    peerServed: () => null,
  });
}

/** Keeps each node a test starts (`keep(await startNode(…))`) and stops them all after each test. */
export function nodesStoppedAfterEach(): (node: NodeHandle) => NodeHandle {
  const nodes: NodeHandle[] = [];
  afterEach(async () => {
    await Promise.all(nodes.splice(0).map((n) => n.stop()));
  });
  return (node) => {
    nodes.push(node);
    return node;
  };
}

/** A short completion asked of `node`: its status and body, or status 0 and why the connection failed. */
export function completionOutcome(node: NodeHandle): Promise<{ status: number; body: string }> {
  return fetch(`${node.apiUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", prompt: "Tell me a story about the sea", max_tokens: 4 }),
  }).then(
    async (res) => ({ status: res.status, body: await res.text() }),
    (e: Error) => ({ status: 0, body: e.message }),
  );
}

/** Client requests `node` has taken in and not yet submitted or answered (its `/cluster` `intakeClients`). */
export function intakeOf(node: NodeHandle): number {
  return (node.runtime.clusterView() as { intakeClients: number }).intakeClients;
}

/** Peers' forwards whose answer streams are open at `node` (the runtime's own count). */
export function openForwards(node: NodeHandle): number {
  return (node.runtime as unknown as { served: { size: number } }).served.size;
}
