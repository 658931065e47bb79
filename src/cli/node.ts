/** `prefixmesh node`: runs one mesh node (client API + peer port + engine) until SIGTERM/SIGINT. */
import type { Command } from "commander";
import { POLICY_NAMES } from "../core/node/policies/index.js";
import { LlamaCppOptionsSchema } from "../engines/llamacpp/options.js";
import { OpenAIEngineOptionsSchema, TOKENIZER_CHOICES } from "../engines/openai/options.js";
import { DEFAULT_POLICY } from "../server/default-policy.js";
import {
  type NodeSettings,
  nodeSettingsSchema,
  resolveNodeSettings,
  type SettingKey,
} from "../server/settings.js";
import { CliError } from "./errors.js";
import { defaultNote } from "./help.js";

const S = nodeSettingsSchema.shape;
const L = LlamaCppOptionsSchema.shape;
const O = OpenAIEngineOptionsSchema.shape;
const def = (key: SettingKey) => defaultNote(S[key]);

export function registerNode(program: Command): void {
  program
    .command("node")
    .description("Run one prefixmesh node: OpenAI-compatible API, peer transport, routing, engine")
    .option("--config <file>", "YAML config file (flags > PREFIXMESH_* env > file)")
    .option("--id <id>", "this node's id (unique in the cluster)")
    .option("--listen <host:port>", `client API address ${def("listen")}`)
    .option("--peer-listen <host:port>", `peer port address ${def("peerListen")}`)
    .option("--peers <list>", "static peers: B=https://host:port,C=…")
    .option(
      "--peers-dns <name[:port]>",
      "peers from DNS: every A/AAAA record (port: default --peer-listen's)",
    )
    .option(
      "--peers-dns-interval-ms <ms>",
      `re-resolve --peers-dns and re-check its peers this often ${def("peersDnsIntervalMs")}`,
    )
    .option(
      "--peers-dns-file <file>",
      "answer --peers-dns from a JSON file {name: [addresses]} instead of DNS",
    )
    .option("--max-peers <n>", `most peers at once, static + DNS-found ${def("maxPeers")}`)
    .option("--engine <kind>", `${S.engine.unwrap().options.join(" | ")} ${def("engine")}`)
    .option("--model <path|generated>", "GGUF path, 'generated', or the remote model name")
    .option("--engine-url <url>", "openai engine: the remote server's base URL (with or without /v1)")
    .option(
      "--engine-tokenizer <kind>",
      `openai engine: ${TOKENIZER_CHOICES.join(" | ")} (auto: the server's /tokenize when it has one, else local) ${defaultNote(O.tokenizer)}`,
    )
    .option(
      "--engine-context-tokens <n>",
      `openai engine: context per request when the server reports none ${defaultNote(O.maxContextTokens)}`,
    )
    .option(
      "--policy <name>",
      `routing policy: ${POLICY_NAMES.join(" | ")} (default ${DEFAULT_POLICY}; affinity = the paper's)`,
    )
    .option("--poll-ms <ms>", `anti-entropy period Δpoll ${def("pollMs")}`)
    .option("--cluster-id <id>", "cluster id (mTLS: taken from the CA)")
    .option("--tls-dir <dir>", "mutual TLS: directory from 'prefixmesh certs init/issue'")
    .option("--secret-file <file>", "shared-secret (HMAC) peer authentication")
    .option("--insecure", "allow unauthenticated peer traffic (trusted networks only)")
    .option("--inject-delay-ms <ms>", "add this delay to every peer message (experiments)")
    .option("--inject-jitter-ms <ms>", "plus uniform jitter up to this")
    .option("--capacity-tokens <n>", "KV capacity in tokens (default: the engine's)")
    .option("--concurrency <n>", `requests run at once ${def("concurrency")}; 1 = batching-free`)
    .option("--forward-timeout-ms <ms>", `give up on a forward after this ${def("forwardTimeoutMs")}`)
    .option(
      "--forward-ack-timeout-ms <ms>",
      `fall back if a forward is not acked in this ${def("forwardAckTimeoutMs")}`,
    )
    .option(
      "--forward-transport <kind>",
      `${S.forwardTransport.unwrap().options.join(" | ")}: one WebSocket per peer, or a request per forward ${def("forwardTransport")}`,
    )
    .option("--max-pending <n>", `client requests in flight before 429 ${def("maxPending")}`)
    .option("--max-connections <n>", `client connections open at once before 503 ${def("maxConnections")}`)
    .option(
      "--cpu-latency-us <µs>",
      "Linux: hold the PM QoS CPU latency limit at this while running (0: idle CPUs poll, not halt; " +
        "faster wake-ups on VMs, idle CPU burnt; needs write access to /dev/cpu_dma_latency)",
    )
    .option("--drain-sec <s>", `on SIGTERM, let in-flight work finish this long ${def("drainSec")}`)
    .option("--threads <n>", "engine threads")
    .option("--slots <n>", `llamacpp: KV slots ${defaultNote(L.slots)}`)
    .option("--saved-states <n>", `llamacpp: saved sequence states kept ${defaultNote(L.maxSavedStates)}`)
    .option(
      "--slot-context <n>",
      `llamacpp: tokens per slot, the longest request ${defaultNote(L.slotContext)}`,
    )
    .option("--sim-profile <name>", "sim engine cost profile")
    .option("--sim-time-scale <x>", "sim engine: scale modelled times (tests)")
    .option("--log-level <level>", `${S.logLevel.unwrap().options.join("|")} ${def("logLevel")}`)
    .action(async (flags: Record<string, unknown>) => {
      const settings = resolveNodeSettings(flags);
      await runNode(settings);
    });
}

async function runNode(settings: NodeSettings): Promise<void> {
  const { startNode } = await import("../server/runtime/start-node.js");
  let handle: Awaited<ReturnType<typeof startNode>>;
  try {
    handle = await startNode(settings);
  } catch (err) {
    // Configuration problems (credentials, peers, security mode) are usage errors: exit 2.
    const usage = [
      "SecurityModeError",
      "DiscoveryError",
      "CertError",
      "SecretError",
      "ZodError",
      "CpuLatencyQosError",
    ].includes((err as Error).name);
    throw new CliError(`node ${settings.id} failed to start: ${(err as Error).message}`, usage ? 2 : 1);
  }
  await new Promise<void>((resolve) => {
    let signals = 0;
    const onSignal = (sig: string) => {
      signals++;
      if (signals > 1) {
        handle.logger.warn({ signal: sig }, "second signal: exiting now");
        process.exit(1);
      }
      handle.logger.info({ signal: sig }, "signal received");
      handle.stop().then(resolve, (err) => {
        handle.logger.error({ err }, "shutdown failed");
        resolve();
      });
    };
    process.on("SIGTERM", () => onSignal("SIGTERM"));
    process.on("SIGINT", () => onSignal("SIGINT"));
    // The cluster launcher's pipe closing means our parent is gone: do not linger as an orphan.
    if (process.env.PREFIXMESH_EXIT_WITH_PARENT === "1") {
      process.stdin.on("end", () => onSignal("parent-exit"));
      process.stdin.on("error", () => onSignal("parent-exit"));
      process.stdin.resume();
    }
  });
  // Let pino flush, then exit even if a stray handle (e.g. a native engine thread) lingers.
  setTimeout(() => process.exit(0), 100).unref();
}
