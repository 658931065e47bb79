/** Output-file flags (`--json FILE`), checked before a long run so a typo fails at once, not after it. */
import { accessSync, constants, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { CliError } from "./errors.js";

/** Throws a CliError unless `path` can be written: its folder exists and is writable, and it is no folder. */
export function checkOutFile(flag: string, path: string): void {
  const full = resolve(path);
  const dir = dirname(full);
  const kind = (p: string) => {
    try {
      return statSync(p).isDirectory() ? "dir" : "file";
    } catch {
      return undefined;
    }
  };
  if (kind(dir) !== "dir") throw new CliError(`${flag}: folder '${dir}' does not exist`);
  if (kind(full) === "dir") throw new CliError(`${flag}: '${path}' is a folder, not a file`);
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    throw new CliError(`${flag}: cannot write in '${dir}'`);
  }
}
