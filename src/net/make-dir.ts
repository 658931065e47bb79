/** Creates a directory and its missing parents, failing with a message naming it. */
import { mkdir, stat } from "node:fs/promises";
import { dirname } from "node:path";

const WHY: Record<string, string> = {
  ENOENT: "this file system does not allow it",
  ENOTDIR: "a parent is a file, not a directory",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
  ELOOP: "too many symbolic links (a loop?)",
};

/** Why a directory could not be made, in words where the code has some. */
function why(e: NodeJS.ErrnoException, at: string): string {
  const code = e.code ?? "";
  return `${WHY[code] ?? e.message} (${code || "error"} at ${at})`;
}

/**
 * `mkdir -p` that ends: Node's own recursive mkdir retries forever where a parent exists but refuses
 * children with ENOENT (/proc), so each level is made once, top-down. Throws `fail(message)`.
 */
export async function makeDir(dir: string, mode: number, fail: (message: string) => Error): Promise<void> {
  const missing: string[] = [];
  for (let d = dir; ; d = dirname(d)) {
    const s = await stat(d).catch((err: NodeJS.ErrnoException) => err);
    if (!(s instanceof Error)) {
      if (!s.isDirectory()) throw fail(`cannot create directory ${dir}: ${d} exists and is not a directory`);
      break;
    }
    if (s.code !== "ENOENT" || dirname(d) === d) throw fail(`cannot create directory ${dir}: ${why(s, d)}`);
    missing.push(d);
  }
  for (const d of missing.reverse()) {
    try {
      await mkdir(d, { mode });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code === "EEXIST") {
        // Made meanwhile (fine), or a symbolic link to nothing, which stat took for a missing name.
        const st = await stat(d).catch(() => undefined);
        if (st?.isDirectory()) continue;
        throw fail(
          `cannot create directory ${dir}: ${d} exists and is not a directory${st ? "" : " (a dangling link?)"}`,
        );
      }
      throw fail(`cannot create directory ${dir}: ${why(e, d)}`);
    }
  }
}
