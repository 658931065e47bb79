/**
 * A local cluster on loopback: N `prefixmesh node` child processes on free ports with freshly made
 * credentials (mutual TLS from a new cluster CA; a shared secret only when openssl is missing), started
 * and stopped together. Children hold a stdin pipe from us and exit when it closes, so they never
 * outlive the launcher even if it is killed hard.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, existsSync, openSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { initCa, issueNodeCert } from "../../net/auth/ca.js";
import { opensslAvailable } from "../../net/auth/openssl.js";
import { writeSecretFile } from "../../net/auth/secret.js";
import { makeDir } from "../../net/make-dir.js";
import { freePort } from "./free-port.js";

export { freePort };

export interface ClusterOptions {
  nodes: number;
  host: string;
  engine: "llamacpp" | "openai" | "sim";
  model: string;
  /** Unset: no `--policy` flag, so every node takes the daemon default (cost-aware, server/default-policy.ts). */
  policy?: string | undefined;
  pollMs?: number | undefined;
  injectDelayMs?: number | undefined;
  injectJitterMs?: number | undefined;
  capacityTokens?: number | undefined;
  simTimeScale?: number | undefined;
  threads?: number | undefined;
  logLevel?: string | undefined;
  /** Force shared-secret mode even when openssl exists. */
  sharedSecret?: boolean | undefined;
  /** Start timeout (engines may load a model first). */
  readyTimeoutMs?: number | undefined;
  extraArgs?: string[] | undefined;
  /** Where credentials and logs go (default: a fresh temp dir, removed on stop). */
  dir?: string | undefined;
  /**
   * Keep the temp dir's logs after stop (its credentials go all the same): `prefixmesh cluster` does,
   * for a look afterwards. Logs of a cluster that failed to start are always kept.
   */
  keepLogs?: boolean | undefined;
  onLog?: (line: string) => void;
  /** Chooses each node's ports (default: freePort); tests substitute a picker that hands out a taken port. */
  pickPort?: ((host: string) => Promise<number>) | undefined;
}

export interface ClusterNode {
  id: string;
  apiUrl: string;
  peerUrl: string;
  pid: number | undefined;
  logFile: string;
}

export interface RunningCluster {
  nodes: ClusterNode[];
  dir: string;
  auth: "mtls" | "shared-secret";
  stop(): Promise<void>;
}

function nodeIds(n: number): string[] {
  const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  return Array.from({ length: n }, (_, i) => (n <= 26 ? (letters[i] as string) : `n${i + 1}`));
}

function mainScript(): string {
  const p = fileURLToPath(new URL("../../cli/main.js", import.meta.url));
  if (!existsSync(p)) throw new Error(`${p} is missing: run 'npm run build' first`);
  return p;
}

export async function startCluster(o: ClusterOptions): Promise<RunningCluster> {
  const say = o.onLog ?? (() => {});
  const ownDir = o.dir === undefined;
  const dir = o.dir ?? (await mkdtemp(join(tmpdir(), "prefixmesh-cluster-")));
  // A caller's `dir` may be anywhere: makeDir says why it cannot be made (Node's mkdir may hang, /proc).
  await makeDir(join(dir, "logs"), 0o777, (m) => new Error(m));
  const ids = nodeIds(o.nodes);
  const credDir = join(dir, "credentials");
  let auth: RunningCluster["auth"];
  if (!o.sharedSecret && (await opensslAvailable())) {
    await initCa(credDir, { clusterId: `local-${Date.now().toString(36)}` });
    for (const id of ids) await issueNodeCert(credDir, id);
    auth = "mtls";
  } else {
    if (!o.sharedSecret)
      say("openssl not found: falling back to a fresh shared secret (HMAC) for peer authentication");
    await makeDir(credDir, 0o700, (m) => new Error(m));
    await writeSecretFile(join(credDir, "cluster.secret"));
    auth = "shared-secret";
  }
  const scheme = auth === "mtls" ? "https" : "http";
  const ports: { api: number; peer: number }[] = [];
  const nodes: ClusterNode[] = ids.map((id) => ({
    id,
    apiUrl: "",
    peerUrl: "",
    pid: undefined,
    logFile: join(dir, "logs", `${id}.log`),
  }));
  const pickPort = o.pickPort ?? freePort;
  const pickPorts = async () => {
    for (const [i, n] of nodes.entries()) {
      ports[i] = { api: await pickPort(o.host), peer: await pickPort(o.host) };
      n.apiUrl = `http://${o.host}:${ports[i]?.api}`;
      n.peerUrl = `${scheme}://${o.host}:${ports[i]?.peer}`;
    }
  };
  const main = mainScript();
  const children: ChildProcess[] = [];
  const exited = new Map<ChildProcess, Promise<void>>();
  let stopping = false;

  let failed = false;
  const killAll = () =>
    Promise.all(
      children.map(async (c) => {
        if (c.exitCode !== null || c.signalCode !== null) return;
        c.kill("SIGTERM");
        const done = exited.get(c);
        const timer = setTimeout(() => c.kill("SIGKILL"), 30_000);
        await done;
        clearTimeout(timer);
      }),
    );
  const stop = async () => {
    stopping = true;
    await killAll();
    if (ownDir) await rm(o.keepLogs || failed ? credDir : dir, { recursive: true, force: true });
  };

  const spawnAll = () => {
    for (const [i, n] of nodes.entries()) {
      const peers = nodes
        .filter((_, j) => j !== i)
        .map((p) => `${p.id}=${p.peerUrl}`)
        .join(",");
      const args = [
        main,
        "node",
        "--id",
        n.id,
        "--listen",
        `${o.host}:${ports[i]?.api}`,
        "--peer-listen",
        `${o.host}:${ports[i]?.peer}`,
        "--peers",
        peers,
        "--engine",
        o.engine,
        "--model",
        o.model,
        ...(auth === "mtls" ? ["--tls-dir", credDir] : ["--secret-file", join(credDir, "cluster.secret")]),
        ...opt("--policy", o.policy),
        ...opt("--poll-ms", o.pollMs),
        ...opt("--inject-delay-ms", o.injectDelayMs),
        ...opt("--inject-jitter-ms", o.injectJitterMs),
        ...opt("--capacity-tokens", o.capacityTokens),
        ...opt("--sim-time-scale", o.simTimeScale),
        ...opt("--threads", o.threads),
        ...opt("--log-level", o.logLevel),
        ...(o.extraArgs ?? []),
      ];
      // Children write their logs straight to files, so they never depend on us staying alive to relay them.
      const logFd = openSync(n.logFile, "a");
      const child = spawn(process.execPath, args, {
        stdio: ["pipe", logFd, logFd],
        env: { ...process.env, PREFIXMESH_EXIT_WITH_PARENT: "1" },
      });
      closeSync(logFd);
      n.pid = child.pid;
      children.push(child);
      exited.set(
        child,
        new Promise((resolve) => {
          child.once("exit", (code, signal) => {
            if (!stopping)
              say(`node ${n.id} exited unexpectedly (code ${code}, signal ${signal}); log: ${n.logFile}`);
            resolve();
          });
        }),
      );
    }
  };

  try {
    for (let attempt = 1; ; attempt++) {
      await pickPorts();
      spawnAll();
      try {
        await waitUntilMeshed(nodes, children, o.readyTimeoutMs ?? 180_000);
        break;
      } catch (err) {
        // A port checked free can still be taken by another process before the child binds it:
        // start the whole cluster again on fresh ports, since every node's peer list names them.
        if (attempt >= PORT_ATTEMPTS || !String(err).includes("EADDRINUSE")) throw err;
        say(`a port was taken before a node could bind it; restarting the cluster on fresh ports`);
        stopping = true;
        await killAll();
        stopping = false;
        children.length = 0;
        exited.clear();
      }
    }
  } catch (err) {
    failed = true; // the error names a log file: keep it
    await stop();
    throw err;
  }
  return { nodes, dir, auth, stop };
}

/** Start attempts when a chosen port is taken before its node binds it. */
const PORT_ATTEMPTS = 3;

function opt(flag: string, v: string | number | undefined): string[] {
  return v === undefined ? [] : [flag, String(v)];
}

/** Every node ready (/ready) and seeing every peer live (they have exchanged snapshots). */
async function waitUntilMeshed(
  nodes: ClusterNode[],
  children: ChildProcess[],
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const dead = children.findIndex((c) => c.exitCode !== null || c.signalCode !== null);
    if (dead >= 0) {
      const n = nodes[dead] as ClusterNode;
      throw new Error(`node ${n.id} exited during startup:\n${tail(n.logFile)}`);
    }
    const views = await Promise.all(
      nodes.map(async (n) => {
        try {
          // Ready too: peers can see a node live while it still boots (calibrates) and refuses clients.
          const ready = await fetch(`${n.apiUrl}/ready`, { signal: AbortSignal.timeout(2000) });
          if (!ready.ok) return undefined;
          const r = await fetch(`${n.apiUrl}/cluster`, { signal: AbortSignal.timeout(2000) });
          return r.ok ? ((await r.json()) as { peers: { liveness: string }[] }) : undefined;
        } catch {
          return undefined;
        }
      }),
    );
    if (
      views.every(
        (v) => v && v.peers.length === nodes.length - 1 && v.peers.every((p) => p.liveness === "live"),
      )
    ) {
      return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(
    `cluster not meshed after ${Math.round(timeoutMs / 1000)} s; logs in ${nodes[0]?.logFile ?? "?"}`,
  );
}

function tail(file: string): string {
  try {
    return readFileSync(file, "utf8").split("\n").slice(-15).join("\n");
  } catch {
    return "(no log)";
  }
}
