/** Shared secrets: parsing hex and base64, and the 0600 secret file written and loaded. */
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSecretFile, parseSecret, SecretError, writeSecretFile } from "../../src/net/auth/secret.js";

describe("secrets", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "pm-secret-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("parses hex and base64 of at least 32 bytes", () => {
    expect(parseSecret("ab".repeat(32)).length).toBe(32);
    expect(parseSecret(` ${Buffer.alloc(40, 7).toString("base64")}\n`).length).toBe(40);
    expect(parseSecret(Buffer.alloc(33, 250).toString("base64url")).length).toBe(33);
    expect(() => parseSecret("ab".repeat(16))).toThrow(/16 bytes; at least 32/);
    expect(() => parseSecret("password123!")).toThrow(SecretError);
    expect(() => parseSecret("")).toThrow(/empty/);
  });

  it("writes a 0600 secret file, refuses to overwrite it, and loads it", async () => {
    const f = join(dir, "secret");
    await writeSecretFile(f);
    expect((await stat(f)).mode & 0o777).toBe(0o600);
    await expect(writeSecretFile(f)).rejects.toThrow(/already exists/);
    expect((await loadSecretFile(f)).length).toBe(32);
    const weak = join(dir, "weak");
    await writeFile(weak, "hunter2");
    await expect(loadSecretFile(weak)).rejects.toThrow(/weak: /);
    await expect(loadSecretFile(join(dir, "absent"))).rejects.toThrow(/not found/);
    const big = join(dir, "big");
    await writeFile(big, "a".repeat(10_000));
    await expect(loadSecretFile(big)).rejects.toThrow(/too large/);
  });
});
