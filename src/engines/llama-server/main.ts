/**
 * `npm run engines:llama-server [-- --force] [-- --jobs N]`: builds llama.cpp's server once per
 * machine (see build.ts) and prints its path on stdout. A second run finds it and exits at once.
 */
import { parseArgs } from "node:util";
import { ensureLlamaServer, LlamaServerBuildError } from "./build.js";

function main(): number {
  let values: { force?: boolean; jobs?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      options: {
        force: { type: "boolean" },
        jobs: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (e) {
    process.stderr.write(`engines:llama-server: ${(e as Error).message}\n`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(
      "usage: npm run engines:llama-server [-- --force] [-- --jobs N]\n" +
        "Builds llama-server (CPU only) from node-llama-cpp's bundled llama.cpp into\n" +
        "$PREFIXMESH_CACHE_DIR/llama-server (default ~/.cache/prefixmesh) and prints its path.\n",
    );
    return 0;
  }
  let jobs: number | undefined;
  if (values.jobs !== undefined) {
    jobs = Number(values.jobs);
    if (!Number.isInteger(jobs) || jobs < 1 || jobs > 256) {
      process.stderr.write(
        `engines:llama-server: --jobs must be an integer in 1..256, got '${values.jobs}'\n`,
      );
      return 2;
    }
  }
  try {
    const r = ensureLlamaServer({ force: values.force ?? false, ...(jobs ? { jobs } : {}) });
    if (!r.built) process.stderr.write(`llama-server ${r.source.release} is already built\n`);
    process.stdout.write(`${r.binary}\n`);
    return 0;
  } catch (e) {
    const known = e instanceof LlamaServerBuildError || (e as Error).message.includes("node-llama-cpp");
    process.stderr.write(`engines:llama-server: ${known ? (e as Error).message : (e as Error).stack}\n`);
    return 1;
  }
}

process.exitCode = main();
