/** The cluster launcher's directory: one that cannot be made is refused, saying why. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, it } from "vitest";
import { startCluster } from "../../src/server/cluster/launcher.js";

it("refuses a directory under a file, naming the file", async () => {
  const tmp = await mkdtemp(join(tmpdir(), "prefixmesh-cluster-dir-"));
  try {
    await writeFile(join(tmp, "file"), "");
    const o = {
      nodes: 1,
      host: "127.0.0.1",
      engine: "sim" as const,
      model: "generated",
      dir: join(tmp, "file", "run"),
    };
    await expect(startCluster(o)).rejects.toThrow(
      /cannot create directory .*run.logs: a parent is a file, not a directory/,
    );
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
});
