/**
 * `npm run test:busy`: the test suite run several times (BUSY_RUNS, default 3) while CPU burners
 * (BUSY_BURNERS, default one per core) keep every core busy — what a loaded CI machine does to
 * timing-sensitive tests. Extra arguments go to `vitest run` (e.g. test files to narrow it down).
 * Prints each run's outcome and exits non-zero if any run failed.
 *
 * The burners must never outlive the run, however it ends: they are stopped on exit, on SIGINT,
 * SIGTERM and SIGHUP, and each burner also leaves by itself when its parent is gone (its stdin pipe
 * closes, or it is re-parented), so even a killed runner leaves no spinning process behind.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";

/**
 * A burner: spins in slices, and between slices leaves if its parent is gone. Plain JavaScript for
 * `node -e`, so it runs the same from the built script and from a test.
 */
export const BURNER = `
const parent = process.ppid;
let gone = false;
process.stdin.on("close", () => { gone = true; });
process.stdin.on("end", () => { gone = true; });
process.stdin.resume();
let x = 0;
function slice() {
  if (gone || process.ppid !== parent) process.exit(0);
  const until = Date.now() + 50;
  while (Date.now() < until) x = (x * 1103515245 + 12345) % 2147483648;
  setImmediate(slice);
}
slice();
`;

export interface Burners {
  readonly pids: readonly number[];
  /** Stops every burner and waits until each has exited. */
  stop(): Promise<void>;
}

/** Starts `count` burner processes. */
export function startBurners(count: number): Burners {
  const procs: ChildProcess[] = [];
  for (let i = 0; i < count; i++) {
    procs.push(spawn(process.execPath, ["-e", BURNER], { stdio: ["pipe", "ignore", "inherit"] }));
  }
  const stopSync = (): void => {
    for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
  };
  // Whatever ends this process, the burners go first (a synchronous kill: 'exit' allows no waiting).
  process.once("exit", stopSync);
  return {
    pids: procs.flatMap((p) => (p.pid === undefined ? [] : [p.pid])),
    async stop() {
      const exited = procs.map((p) =>
        p.exitCode !== null || p.signalCode !== null
          ? Promise.resolve()
          : new Promise<void>((resolve) => p.once("exit", () => resolve())),
      );
      stopSync();
      await Promise.all(exited);
      process.removeListener("exit", stopSync);
    },
  };
}

/**
 * Runs `command args` with inherited output; resolves to its exit code (1 if it died by a signal).
 * If this process exits first (a signal), the run is told to stop too.
 */
function run(command: string, args: readonly string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: "inherit" });
    const stopChild = (): void => {
      child.kill("SIGTERM");
    };
    process.once("exit", stopChild);
    child.once("error", (err) => {
      process.removeListener("exit", stopChild);
      reject(err);
    });
    child.once("exit", (code) => {
      process.removeListener("exit", stopChild);
      resolve(code ?? 1);
    });
  });
}

export interface BusyOptions {
  runs: number;
  burners: number;
  /** The suite: a command and its arguments. */
  command: string;
  args: readonly string[];
  log?: (line: string) => void;
}

/** The suite `runs` times under `burners` burners; the exit code of each run. */
export async function runBusy(o: BusyOptions): Promise<number[]> {
  const log = o.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const burners = startBurners(o.burners);
  const codes: number[] = [];
  try {
    for (let i = 1; i <= o.runs; i++) {
      log(`test:busy: run ${i} of ${o.runs}, ${o.burners} burner(s) spinning`);
      const started = Date.now();
      const code = await run(o.command, o.args);
      codes.push(code);
      log(
        `test:busy: run ${i} ${code === 0 ? "passed" : `FAILED (exit ${code})`} in ${((Date.now() - started) / 1000).toFixed(0)} s`,
      );
    }
  } finally {
    await burners.stop();
  }
  return codes;
}

function positiveInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0 || n > 64)
    throw new RangeError(`${name} must be an integer 0-64, got "${raw}"`);
  return n;
}

async function main(): Promise<number> {
  const runs = positiveInt("BUSY_RUNS", 3);
  const burners = positiveInt("BUSY_BURNERS", availableParallelism());
  const vitest = fileURLToPath(new URL("../../node_modules/vitest/vitest.mjs", import.meta.url));
  const stop = (signal: NodeJS.Signals) => () => {
    process.stderr.write(`test:busy: ${signal}, stopping the burners\n`);
    process.exit(130); // the 'exit' hooks stop the burners and the run in progress
  };
  for (const s of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.once(s, stop(s));
  const codes = await runBusy({
    runs,
    burners,
    command: process.execPath,
    args: [vitest, "run", ...process.argv.slice(2)],
  });
  const failed = codes.filter((c) => c !== 0).length;
  process.stdout.write(`test:busy: ${codes.length - failed} of ${codes.length} runs passed under load\n`);
  return failed === 0 ? 0 : 1;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`test:busy: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(1);
    },
  );
}
