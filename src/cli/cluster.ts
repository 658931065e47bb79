/** `prefixmesh cluster`: N nodes on loopback with fresh credentials, until Ctrl-C / SIGTERM. */
import { isIP } from "node:net";
import { join } from "node:path";
import type { Command } from "commander";
import { POLICY_NAMES } from "../core/node/policies/index.js";
import { MODEL_PRESETS, type ModelPreset } from "../engines/gguf/presets.js";
import { DEFAULT_POLICY } from "../server/default-policy.js";
import { DEFAULT_GENERATED } from "../server/runtime/engine-loader.js";
import { flagName, type SettingKey } from "../server/settings/index.js";
import { CliError, parseNumber } from "./errors.js";
import { parseSetting } from "./flags.js";

/**
 * A generated model's own context in tokens (undefined for any other model). The demo gives its slots
 * all of it: the engine's default slot (2048) would refuse a sizeable share of MMLU's 5-shot prompts,
 * which reach about 4000 of this model's tokens.
 */
export function generatedContext(model: string): number | undefined {
  const spec = model === "generated" ? DEFAULT_GENERATED : model;
  const preset = /^generated:([\w-]+)$/.exec(spec)?.[1];
  if (preset === undefined || !Object.hasOwn(MODEL_PRESETS, preset)) return undefined;
  return MODEL_PRESETS[preset as ModelPreset].contextLength;
}

/**
 * The engines a loopback cluster runs. An openai node needs a remote server of its own (--engine-url),
 * which this command does not take: nodes sharing one server would each mirror its cache as their own.
 */
const CLUSTER_ENGINES = ["llamacpp", "sim"] as const;

interface ClusterFlags {
  nodes: string;
  engine: string;
  model: string;
  host: string;
  policy?: string;
  pollMs?: string;
  injectDelayMs?: string;
  injectJitterMs?: string;
  capacityTokens?: string;
  simTimeScale?: string;
  threads?: string;
  slots?: string;
  savedStates?: string;
  slotContext?: string;
  cpuLatencyUs?: string;
  logLevel?: string;
  sharedSecret?: boolean;
  json?: boolean;
}

export function registerCluster(program: Command): void {
  program
    .command("cluster")
    .description(
      "Start N prefixmesh nodes on loopback with fresh cluster credentials (Ctrl-C stops them all)",
    )
    .option("--nodes <n>", "number of nodes", "4")
    .option("--engine <kind>", CLUSTER_ENGINES.join(" | "), "llamacpp")
    .option("--model <path|generated>", "model for every node", "generated")
    .option("--host <ip>", "loopback address to bind", "127.0.0.1")
    .option(
      "--policy <name>",
      `routing policy: ${POLICY_NAMES.join(" | ")} (default ${DEFAULT_POLICY}; affinity = the paper's)`,
    )
    .option("--poll-ms <ms>", "anti-entropy period Δpoll")
    .option("--inject-delay-ms <ms>", "delay added to every peer message")
    .option("--inject-jitter-ms <ms>", "plus uniform jitter up to this")
    .option("--capacity-tokens <n>", "KV capacity per node in tokens")
    .option("--sim-time-scale <x>", "sim engine: scale modelled times")
    .option("--threads <n>", "engine threads per node (default 1 for llamacpp: nodes share the cores)")
    .option("--slots <n>", "llamacpp: KV slots per node")
    .option("--saved-states <n>", "llamacpp: saved sequence states per node")
    .option(
      "--slot-context <n>",
      `llamacpp: tokens per slot per node (default with a generated model: its own context, ${generatedContext("generated")} for 'generated')`,
    )
    .option("--cpu-latency-us <µs>", "every node holds Linux's PM QoS CPU latency limit at this")
    .option("--log-level <level>", "node log level (logs go to files)")
    .option("--shared-secret", "use a shared secret instead of mutual TLS")
    .option("--json", "print one JSON line with the node URLs once ready")
    .action(async (f: ClusterFlags) => {
      const nodes = parseNumber("--nodes", f.nodes, { min: 1, max: 64, integer: true });
      // Every node runs on this machine, and its peers reach it only at this address: a loopback one.
      if (!isLoopbackIp(f.host))
        throw new CliError(
          `--host must be a loopback address (127.x.x.x or ::1), got '${f.host}': cluster runs every node ` +
            "on this machine; for a mesh across machines start each with 'prefixmesh node' (docs/deploy.md)",
        );
      const engine = parseSetting("engine", f.engine);
      if (engine === "openai")
        throw new CliError(
          "--engine openai needs a remote server per node (--engine-url), which cluster does not take: " +
            "start such nodes with 'prefixmesh node' (docs/engines.md)",
        );
      if (engine === "sim" && f.model !== "generated")
        throw new CliError("--model needs --engine llamacpp: the sim engine runs no model");
      // Checked against the nodes' own schema before anything starts: a bad value is a usage error
      // (exit 2) here, not a failed node start.
      const num = (key: SettingKey, v: string | undefined) =>
        v === undefined ? undefined : (parseSetting(key, v) as number | undefined);
      const options = {
        nodes,
        host: f.host,
        engine,
        model: f.model,
        policy: f.policy === undefined ? undefined : parseSetting("policy", f.policy),
        pollMs: num("pollMs", f.pollMs),
        injectDelayMs: num("injectDelayMs", f.injectDelayMs),
        injectJitterMs: num("injectJitterMs", f.injectJitterMs),
        capacityTokens: num("capacityTokens", f.capacityTokens),
        simTimeScale: num("simTimeScale", f.simTimeScale),
        threads: num("threads", f.threads) ?? (engine === "llamacpp" ? 1 : undefined),
        logLevel: f.logLevel === undefined ? undefined : parseSetting("logLevel", f.logLevel),
        extraArgs: (["slots", "slotContext", "savedStates", "cpuLatencyUs"] as const).flatMap((key) => {
          const v =
            num(key, f[key]) ??
            (key === "slotContext" && engine === "llamacpp" ? generatedContext(f.model) : undefined);
          return v === undefined ? [] : [flagName(key), String(v)];
        }),
        sharedSecret: f.sharedSecret,
      };
      const { startCluster } = await import("../server/cluster/launcher.js");
      const say = (s: string) => process.stderr.write(`${s}\n`);
      say(`starting ${nodes} ${engine} node(s) on ${f.host}…`);
      let cluster: Awaited<ReturnType<typeof startCluster>>;
      try {
        cluster = await startCluster({ ...options, keepLogs: true, onLog: say });
      } catch (err) {
        throw new CliError(`cluster failed to start: ${(err as Error).message}`, 1);
      }
      if (f.json) {
        process.stdout.write(
          `${JSON.stringify({ ready: true, auth: cluster.auth, dir: cluster.dir, nodes: cluster.nodes })}\n`,
        );
      } else {
        const first = cluster.nodes[0];
        process.stdout.write(`prefixmesh cluster ready: ${nodes} nodes, peer auth ${cluster.auth}\n`);
        for (const n of cluster.nodes) {
          process.stdout.write(`  node ${n.id}  api ${n.apiUrl}/v1  peer ${n.peerUrl}  log ${n.logFile}\n`);
        }
        process.stdout.write(
          `dashboard: ${first?.apiUrl}/dashboard   cluster view: ${first?.apiUrl}/cluster\n`,
        );
        const { modelOf } = await import("../bench/replay.js");
        const model = first ? await modelOf(first.apiUrl).catch(() => undefined) : undefined;
        process.stdout.write(
          `try: curl ${first?.apiUrl}/v1/completions -H 'content-type: application/json' ` +
            `-d '{"model":"${model ?? "<see /v1/models>"}","prompt":"Once upon a time","max_tokens":8}'\n`,
        );
        process.stdout.write(
          `bench: npm run prefixmesh -- bench --url ${cluster.nodes.map((n) => n.apiUrl).join(",")}\n`,
        );
        process.stdout.write("Ctrl-C stops every node.\n");
      }
      await new Promise<void>((resolve) => {
        let n = 0;
        const onSignal = () => {
          if (++n > 1) return;
          say("stopping nodes…");
          cluster.stop().then(resolve, resolve);
        };
        process.on("SIGINT", onSignal);
        process.on("SIGTERM", onSignal);
      });
      say(`all nodes stopped; logs kept in ${join(cluster.dir, "logs")}`);
    });
}

/** 127.0.0.0/8 or ::1, written as an address (no host name). */
export function isLoopbackIp(host: string): boolean {
  if (isIP(host) === 4) return host.startsWith("127.");
  return isIP(host) === 6 && (host === "::1" || /^(0{1,4}:){7}0{0,3}1$/.test(host));
}
