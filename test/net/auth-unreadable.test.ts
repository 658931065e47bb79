/**
 * A credential file the node's user may not read (a 0600 key of another owner, a 0750 directory of
 * another group) is a configuration error naming the file and the user, not "not found" or a bare
 * EACCES with exit 1 (which systemd's unit restarts forever). Permissions are mocked: tests run as root.
 */
import { afterEach, describe, expect, it, vi } from "vitest";

const denied = (path: string) =>
  Object.assign(new Error(`EACCES: permission denied, open '${path}'`), { code: "EACCES" });
let deny: "stat" | "read" | undefined;

vi.mock("node:fs/promises", async (original) => {
  const fs = await original<typeof import("node:fs/promises")>();
  return {
    ...fs,
    stat: async (p: string) => {
      if (deny === "stat") throw denied(p);
      return { size: 10 };
    },
    readFile: async (p: string) => {
      if (deny === "read") throw denied(p);
      return "x";
    },
  };
});

const { CertError, readBounded } = await import("../../src/net/auth/ca.js");
const { loadSecretFile } = await import("../../src/net/auth/secret.js");

describe("an unreadable credential file", () => {
  afterEach(() => {
    deny = undefined;
  });

  it("a directory the user may not search is said as unreadable, not as missing", async () => {
    deny = "stat";
    const err = await readBounded("/etc/prefixmesh/tls/ca.crt", 100, "CA certificate").catch((e) => e);
    expect(err).toBeInstanceOf(CertError);
    expect(err.message).toMatch(
      /CA certificate \/etc\/prefixmesh\/tls\/ca.crt is not readable by this process/,
    );
    expect(err.message).not.toMatch(/not found/);
  });

  it("a file the user may not read is a CertError (exit 2) naming it and what to change", async () => {
    deny = "read";
    const err = await readBounded("/etc/prefixmesh/tls/node-A.key", 100, "key of node 'A'").catch((e) => e);
    expect(err).toBeInstanceOf(CertError);
    expect(err.message).toMatch(/key of node 'A' .*node-A.key is not readable .*read access/);
  });

  it("the shared-secret file says the same", async () => {
    deny = "read";
    await expect(loadSecretFile("/etc/prefixmesh/cluster.secret")).rejects.toThrow(
      /is not readable by this process/,
    );
  });
});
