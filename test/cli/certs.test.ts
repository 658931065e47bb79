import { X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { registerCerts } from "../../src/cli/certs.js";
import { CliError } from "../../src/cli/errors.js";
import { opensslAvailable } from "../../src/net/auth/openssl.js";
import { loadTlsMaterial } from "../../src/net/auth/tls.js";

const hasOpenssl = await opensslAvailable();
if (!hasOpenssl) console.warn("skipping certs CLI tests: no openssl on PATH");

/** Runs `prefixmesh certs …` in-process and returns what it printed. */
async function run(...args: string[]): Promise<string> {
  const program = new Command("prefixmesh").exitOverride();
  registerCerts(program);
  let printed = "";
  const spy = vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
    printed += String(chunk);
    return true;
  });
  try {
    await program.parseAsync(["node", "prefixmesh", "certs", ...args]);
  } finally {
    spy.mockRestore();
  }
  return printed;
}

// One scratch directory for the file; each test uses its own subpath in it.
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pm-certs-cli-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe.skipIf(!hasOpenssl)("prefixmesh certs", () => {
  it("init creates a CA and issue creates loadable node certificates", async () => {
    const ca = join(dir, "c");
    expect(await run("init", "--dir", ca, "--cluster-id", "lab")).toMatch(
      /cluster CA created for cluster 'lab'/,
    );
    const out = await run("issue", "--dir", ca, "--id", "A", "--san", "10.1.2.3,a.lab.example");
    expect(out).toMatch(/node 'A' in cluster 'lab'/);
    const m = await loadTlsMaterial(ca, "A");
    const cert = new X509Certificate(m.cert);
    expect(cert.subjectAltName).toContain("IP Address:10.1.2.3");
    expect(cert.subjectAltName).toContain("DNS:a.lab.example");
    expect(cert.subjectAltName).toContain("IP Address:127.0.0.1");
  });

  it("turns bad input into CLI errors (exit code 2)", async () => {
    const ca = join(dir, "d");
    await run("init", "--dir", ca);
    const again = await run("init", "--dir", ca).catch((e) => e);
    expect(again).toBeInstanceOf(CliError);
    expect(again.exitCode).toBe(2);
    expect(again.message).toMatch(/already exists/);
    await expect(run("issue", "--dir", ca, "--id", "no/slash")).rejects.toThrow(/invalid node id/);
    await expect(run("issue", "--dir", ca, "--id", "B", "--san", "bad host!")).rejects.toThrow(/invalid SAN/);
    await expect(run("issue", "--dir", join(dir, "none"), "--id", "B")).rejects.toThrow(/no cluster CA/);
    await expect(run("init", "--dir", join(dir, "e"), "--days", "0")).rejects.toThrow(/--days must be/);
  });
});

// No openssl needed: shared-secret mode is the fallback when openssl is missing.
describe("prefixmesh certs secret", () => {
  it("secret writes a 0600 file with 32 random bytes", async () => {
    const f = join(dir, "secret.hex");
    expect(await run("secret", "--out", f)).toMatch(/shared secret written/);
    expect((await stat(f)).mode & 0o777).toBe(0o600);
    expect((await readFile(f, "utf8")).trim()).toMatch(/^[0-9a-f]{64}$/);
    await expect(run("secret", "--out", f)).rejects.toThrow(/already exists/);
  });
});

// No openssl needed: the directory is made before any key.
describe("prefixmesh certs init --dir that cannot be created", () => {
  it("fails at once with exit 2 naming the directory, not a hang or a stack", async () => {
    const file = join(dir, "a-file");
    await writeFile(file, "x");
    const dangling = join(dir, "dangling");
    await symlink(join(dir, "nowhere"), dangling);
    const loop = join(dir, "loop");
    await symlink(loop, loop);
    const cases: [string, RegExp][] = [
      ["/proc/prefixmesh-no-such-dir", /this file system does not allow it/],
      [join(file, "sub"), /a parent is a file/],
      [file, /exists and is not a directory/],
      [join(dangling, "sub"), /dangling exists and is not a directory \(a dangling link\?\)/],
      [join(loop, "sub"), /too many symbolic links/],
    ];
    for (const [where, why] of cases) {
      const err = await run("init", "--dir", where).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CliError);
      expect((err as CliError).exitCode).toBe(2);
      expect((err as CliError).message).toContain(`cannot create directory ${where}:`);
      expect((err as CliError).message).toMatch(why);
    }
  }, 10_000);
});
