/** `prefixmesh node`: runs one mesh node (client API + peer port + engine) until SIGTERM/SIGINT. */
import type { Command } from "commander";
import {
  flagName,
  flagSettings,
  type NodeSettings,
  resolveNodeSettings,
  type SettingKey,
  settingDefault,
  settingDoc,
} from "../server/settings/index.js";
import { CliError } from "./errors.js";

/** `--poll-ms <ms>`, with the setting's meaning and default from the schema (src/server/settings.ts). */
function addSetting(cmd: Command, key: SettingKey): void {
  const doc = settingDoc(key);
  const def = settingDefault(key);
  const flag = doc.value === undefined ? flagName(key) : `${flagName(key)} <${doc.value}>`;
  const text = def === undefined ? doc.description : `${doc.description} (default ${def})`;
  // The texts are markdown for docs/configuration.md; a terminal shows them without the code marks.
  cmd.option(flag, text.replace(/`/g, ""));
}

export function registerNode(program: Command): void {
  const cmd = program
    .command("node")
    .description("Run one prefixmesh node: OpenAI-compatible API, peer transport, routing, engine")
    .option("--config <file>", "YAML config file (flags > PREFIXMESH_* env > file)");
  for (const key of flagSettings()) addSetting(cmd, key);
  cmd.action(async (flags: Record<string, unknown>) => {
    const settings = resolveNodeSettings(flags);
    await runNode(settings);
  });
}

/** Configuration the node refuses (credentials, peers, security mode, a bad model file): usage errors. */
const USAGE_ERRORS = [
  "SettingsError",
  "SecurityModeError",
  "DiscoveryError",
  "CertError",
  "SecretError",
  "ZodError",
  "CpuLatencyQosError",
  "GgufError",
];

/**
 * 2 for what the command line or configuration must change, 1 for a failure at run time (a port
 * another process holds, an engine that would not load); an error may carry its own `exitCode`.
 */
export function startExitCode(err: unknown): 1 | 2 {
  const e = err as { name?: string; exitCode?: unknown };
  if (e?.exitCode === 1 || e?.exitCode === 2) return e.exitCode;
  return USAGE_ERRORS.includes(e?.name ?? "") ? 2 : 1;
}

async function runNode(settings: NodeSettings): Promise<void> {
  const { startNode } = await import("../server/runtime/start-node.js");
  let handle: Awaited<ReturnType<typeof startNode>>;
  try {
    handle = await startNode(settings);
  } catch (err) {
    throw new CliError(`node ${settings.id} failed to start: ${(err as Error).message}`, startExitCode(err));
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
