/**
 * `prefixmesh sim`: runs the discrete-event simulator (src/sim) on a workload and prints the paper's
 * measurements (latency, expected vs actual hit, hotspot share, gossip cost).
 */
import { writeFile } from "node:fs/promises";
import { SingleBar } from "cli-progress";
import type { Command } from "commander";
import { DAEMON_NODE_DEFAULTS, nodeConfigSchema } from "../core/node/config.js";
import { ALL_POLICY_NAMES } from "../core/node/policies/index.js";
import { DEFAULT_PROFILE, PROFILE_NAMES } from "../engines/sim/profiles.js";
import { DEFAULT_POLICY } from "../server/default-policy.js";
import type { SimResult } from "../sim/types.js";
import { CliError } from "./errors.js";
import { defaultNote } from "./help.js";
import { checkOutFile } from "./out-file.js";
import { parseSimOptions, type SimOptions } from "./sim-options.js";
import { daemonConfigLabel, formatSummary, hitBounds } from "./sim-summary.js";
import {
  addWorkloadOptions,
  checkChatLength,
  DEFAULT_MMLU_DIR,
  loadWorkload,
  WORKLOADS,
} from "./workload-flags.js";

export { parseSimOptions, type SimOptions } from "./sim-options.js";

/** The simulated nodes' settings, whose defaults the help states. */
const N = nodeConfigSchema.shape;

export async function runSimCommand(
  o: SimOptions,
  io: { out: NodeJS.WritableStream; err: NodeJS.WriteStream },
): Promise<SimResult> {
  const { config, workload, mmluDir, requests, rate } = parseSimOptions(o);
  // A --json path that cannot be written fails now, not after a long run whose result it would lose.
  if (o.json !== undefined) checkOutFile("--json", o.json);
  const w = checkChatLength(
    workload,
    requests,
    await loadWorkload(workload, { dir: mmluDir, seed: config.seed, requests, openLoopRate: rate }),
  );
  const { runSimulation } = await import("../sim/run.js");
  const useBar = io.err.isTTY === true;
  const bar = useBar
    ? new SingleBar({ stream: io.err, format: "simulating [{bar}] {value}/{total} requests" })
    : undefined;
  bar?.start(w.requests.length, 0);
  // Records: the ideal and own-history hit bounds read them, and --json writes them.
  const result = runSimulation({ ...config, keepRecords: true }, w, {
    onProgress: (done) => bar?.update(done),
  });
  bar?.stop();
  io.out.write(
    formatSummary(result, w.meta ? `${w.name} (${w.meta.schedule})` : w.name, hitBounds(w, result)),
  );
  if (o.json !== undefined) {
    try {
      await writeFile(o.json, `${JSON.stringify({ ...result, config })}\n`);
    } catch (err) {
      throw new CliError(`cannot write --json file '${o.json}': ${(err as Error).message}`);
    }
    io.out.write(`wrote ${o.json}\n`);
  }
  return result;
}

export function registerSim(program: Command): void {
  const cmd = program
    .command("sim")
    .description("Run the deterministic discrete-event simulator of a prefixmesh cluster")
    .option("--nodes <n>", "number of nodes", "4")
    .option(
      "--policy <name>",
      `routing policy: ${ALL_POLICY_NAMES.join(" | ")} (affinity = the paper's Algorithm 1; centralized = a baseline, SGLang's cache_aware with a global view via the oracle)`,
      DEFAULT_POLICY,
    )
    .option("--comm-ms <ms>", "Δcomm: one-way network delay", "2")
    .option("--jitter-ms <ms>", "uniform jitter on Δcomm (±)", "0.5")
    .option("--poll-ms <ms>", "Δpoll: anti-entropy period", "500")
    .option("--workload <name>", `workload: ${WORKLOADS.join(" | ")}`, "synthetic")
    .option(
      "--mmlu-dir <dir>",
      `MMLU CSV folder (dev/, test/) for the mmlu* workloads (default ${DEFAULT_MMLU_DIR})`,
    );
  addWorkloadOptions(cmd)
    .option("--requests <n>", "number of requests (default: the whole workload)")
    .option("--seed <s>", "seed of the schedule and of the simulation", "1")
    .option("--profile <name>", `engine cost profile: ${PROFILE_NAMES.join(" | ")}`, DEFAULT_PROFILE)
    .option("--capacity-tokens <n>", "KV capacity per node in tokens (default: the profile's)")
    .option(
      "--concurrency <n>",
      `requests each node runs at once ${defaultNote(N.concurrency)}; 1 = batching-free`,
    )
    .option("--loss <p>", "probability each message is lost")
    .option("--dup <p>", "probability each message is duplicated")
    .option("--reorder <p>", "probability each message gets an extra random delay (reordering)")
    .option(
      "--partition <spec...>",
      "partition that heals: GROUP/GROUP@START_MS:END_MS, e.g. 0,1/2,3@60000:120000 (repeatable)",
    )
    .option("--reorder-max-ms <ms>", "largest extra delay of a reordered message (default 10 × (Δcomm + 1))")
    .option("--faults-until-ms <ms>", "loss/duplication/reordering stop at this virtual time")
    .option("--engine-fail <p>", "probability each engine run fails")
    .option(
      "--slow-engine <spec...>",
      "slow a node's engine FACTOR (≥ 1) times: NODExFACTOR[@START_MS:END_MS], e.g. 1x3@10000:20000 (repeatable)",
    )
    .option(
      "--slow-node <spec...>",
      "one node FACTOR (≥ 1) × slower for the whole run: NODE:FACTOR, e.g. 1:10 (repeatable)",
    )
    .option(
      "--stall <spec...>",
      "a stalling peer: acks forwards and never answers them: NODE[@START_MS:END_MS] (repeatable)",
    )
    .option(
      "--refuse <spec...>",
      "a refusing peer: answers every forward with a 503: NODE[@START_MS:END_MS] (repeatable)",
    )
    .option(
      "--lie <spec...>",
      "a lying peer: its answers to forwards carry wrong text: NODE[@START_MS:END_MS] (repeatable)",
    )
    .option(
      "--unbounded <spec...>",
      "an unbounded request: workload request INDEX asks for TOKENS output tokens (no max_tokens): INDEX:TOKENS (repeatable)",
    )
    .option(
      "--abandon <spec...>",
      "a client hanging up: workload request INDEX's client leaves MS (virtual) after sending it, unanswered: INDEX:MS (repeatable)",
    )
    .option("--crash <spec...>", "crash a node: NODE@MS[:RESTART_MS] (virtual ms; repeatable)")
    .option(
      "--unauthenticated <node...>",
      "a node without the cluster's credential: its member checks, and others' of it, fail (--gossip scuttlebutt)",
    )
    .option(
      "--pause <spec...>",
      "freeze a node, then resume it (peers may wrongly suspect it): NODE@MS:UNTIL_MS (repeatable)",
    )
    .option(
      "--random-faults <ms>",
      "draw every fault class over [0, MS) of virtual time from --seed (printed; instead of the fault flags)",
    )
    .option(
      "--daemon-config",
      `run the nodes as \`prefixmesh node\` does by default (${daemonConfigLabel()}); --policy and the node flags still apply`,
    )
    .option(
      "--deadline-ms <ms>",
      "every client request carries this deadline (the API's x-prefixmesh-deadline-ms); a refused request is re-submitted up to 3 times, then counted failed",
    )
    .option(
      "--node-config <json>",
      'any node settings (src/core/node/config.ts) as a JSON object, over the defaults and the node flags, e.g. \'{"freshPeerLoad":true,"advertiseCosts":false}\'',
    )
    .option(
      "--forward-timeout-ms <ms>",
      `give up on a forward after this long ${defaultNote(N.forwardTimeoutMs)}`,
    )
    .option(
      "--forward-ack-timeout-ms <ms>",
      `floor of the wait for a forward's ack: max(this, 4 × RTT) ${defaultNote(N.forwardAckTimeoutMs)}, ${DAEMON_NODE_DEFAULTS.forwardAckTimeoutMs} with --daemon-config; ≥ the forward timeout: acks off`,
    )
    .option(
      "--forward-resends <n>",
      `re-send an unacked forward this often before falling back ${defaultNote(N.forwardResends)}`,
    )
    .option("--rate <req/s>", "open loop: Poisson arrivals at this rate (default: closed loop, the paper)")
    .option("--oracle", "simulation-only reference: estimates always equal the owners' true trees, free")
    .option(
      "--gossip <mode>",
      "full (default, the paper's full mesh) or scuttlebutt (SWIM membership + digest anti-entropy)",
    )
    .option("--max-estimates <m>", "with --gossip scuttlebutt: keep estimates of at most m members")
    .option(
      "--json <file>",
      "also write the full result (config, totals, per-request records) as JSON (fields: README.md)",
    )
    .action(async (opts: SimOptions) => {
      await runSimCommand(opts, { out: process.stdout, err: process.stderr });
    });
}
