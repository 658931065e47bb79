#!/usr/bin/env node
/** The `prefixmesh` command: each subcommand lives in its own file and registers itself here. */
import { Command, CommanderError } from "commander";
import { SettingsError } from "../server/settings/index.js";
import { SimConfigError } from "../sim/setup.js";
import { registerBench } from "./bench.js";
import { registerCerts } from "./certs.js";
import { registerCluster } from "./cluster.js";
import { CliError } from "./errors.js";
import { registerExperiment } from "./experiment.js";
import { registerNode } from "./node.js";
import { registerSim } from "./sim.js";
import { packageVersion } from "./version.js";

const program = new Command("prefixmesh")
  .description("Peer-to-peer LLM serving with decentralized, prefix-cache-aware routing")
  .version(packageVersion(), "-V, --version", "print the version and exit")
  // One line, not the whole help: `node --help` is 80 lines and would scroll the error off screen.
  .showHelpAfterError("(add --help to see the options)")
  .exitOverride();

// A reader that stops early (`prefixmesh sim | head`) closes the pipe: the rest of the output has nowhere
// to go, but the run still finishes and writes its --json / --out files. Any other stream error stays fatal.
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE" && err.code !== "ERR_STREAM_DESTROYED") throw err;
  });
}

registerSim(program);
registerExperiment(program);
registerNode(program);
registerCluster(program);
registerBench(program);
registerCerts(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Help and version exit 0; usage errors exit 2 (commander already printed the message).
    process.exit(err.exitCode === 0 ? 0 : 2);
  }
  // The user's input, told as such: the message alone (a refused simulation config is a usage error).
  if (err instanceof CliError || err instanceof SettingsError || err instanceof SimConfigError) {
    process.stderr.write(`prefixmesh: ${err.message}\n`);
    process.exit(err instanceof SimConfigError ? 2 : err.exitCode);
  }
  process.stderr.write(`prefixmesh: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
}
