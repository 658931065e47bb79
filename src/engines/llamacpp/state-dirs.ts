/**
 * Where saved sequence states live: one directory per engine instance (tmpfs when there is one), removed
 * when the engine closes or the process exits, and swept when its process died without closing.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const STATE_DIR_PREFIX = "prefixmesh-states-";
/**
 * Directories named without a pid (`prefixmesh-states-XXXXXX`, written by builds before the pid was
 * added, or by anything else) cannot be checked for a live owner; they are removed once untouched
 * this long. A live engine's directory changes whenever it saves or drops a state.
 */
export const ORPHAN_STATE_DIR_AGE_MS = 60 * 60 * 1000;
/** State directories of engines not yet closed: removed at process exit (tmpfs is RAM). */
const liveStateDirs = new Set<string>();
process.once("exit", () => {
  for (const d of liveStateDirs) rmSync(d, { recursive: true, force: true });
});

/**
 * Removes state directories left by processes that died without closing (e.g. SIGKILL): those whose
 * pid is gone, and pid-less ones untouched for `ORPHAN_STATE_DIR_AGE_MS`. Best effort: never throws.
 */
export function removeOrphanStateDirs(base: string, now = Date.now()): void {
  let names: string[];
  try {
    names = readdirSync(base);
  } catch {
    return;
  }
  const withPid = new RegExp(`^${STATE_DIR_PREFIX}(\\d+)-`);
  for (const name of names) {
    if (!name.startsWith(STATE_DIR_PREFIX)) continue;
    const dir = join(base, name);
    const m = withPid.exec(name);
    try {
      if (m) {
        try {
          process.kill(Number(m[1]), 0); // throws ESRCH when the owner is gone
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code === "ESRCH") rmSync(dir, { recursive: true, force: true });
        }
      } else {
        const st = statSync(dir);
        if (st.isDirectory() && now - st.mtimeMs > ORPHAN_STATE_DIR_AGE_MS)
          rmSync(dir, { recursive: true, force: true });
      }
    } catch {
      // raced with another sweeper or not ours to remove: leave it
    }
  }
}

/** A fresh state directory for this process under `stateDir` (default: /dev/shm, else the OS temp dir). */
export function createStateDir(stateDir: string | undefined): string {
  const base = stateDir ?? (existsSync("/dev/shm") ? "/dev/shm" : tmpdir());
  mkdirSync(base, { recursive: true });
  removeOrphanStateDirs(base);
  const stateRoot = mkdtempSync(join(base, `${STATE_DIR_PREFIX}${process.pid}-`));
  liveStateDirs.add(stateRoot);
  return stateRoot;
}

/** Removes a closed engine's state directory. */
export function removeStateDir(stateRoot: string): void {
  rmSync(stateRoot, { recursive: true, force: true });
  liveStateDirs.delete(stateRoot);
}
