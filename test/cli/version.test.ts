import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { requireBuild } from "../e2e/helpers.js";

describe("prefixmesh --version", () => {
  it("prints package.json's version and exits 0", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
    for (const flag of ["--version", "-V"]) {
      const out = execFileSync(process.execPath, [requireBuild(), flag], { encoding: "utf8" });
      expect(out.trim()).toBe(pkg.version);
    }
  });
});
