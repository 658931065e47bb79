/** `bench --json FILE`: a file that cannot be written is refused before the run, as one clear line. */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { registerBench } from "../../src/cli/bench.js";
import { CliError } from "../../src/cli/errors.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "pm-bench-json-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Runs `prefixmesh bench …` in-process against a port nothing listens on. */
async function bench(json: string): Promise<unknown> {
  const program = new Command("prefixmesh").exitOverride();
  registerBench(program);
  const args = ["bench", "--url", "http://127.0.0.1:1", "--requests", "1", "--json", json];
  return program.parseAsync(["node", "prefixmesh", ...args]).then(
    () => undefined,
    (err: unknown) => err,
  );
}

describe("prefixmesh bench --json", () => {
  it("refuses a file in a folder that does not exist before contacting any node", async () => {
    const err = await bench(join(dir, "missing", "out.json"));
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).message).toMatch(/^--json: folder '.*missing' does not exist$/);
    expect((err as CliError).exitCode).toBe(2);
  });

  it("refuses a folder given as the file", async () => {
    const err = await bench(dir);
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).message).toMatch(/is a folder, not a file/);
  });

  it("lets a writable path through to the run (which then finds no node)", async () => {
    const err = await bench(join(dir, "out.json"));
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).message).toMatch(/cannot reach http:\/\/127\.0\.0\.1:1/);
  });
});

describe("prefixmesh bench --url", () => {
  it("checks every URL before the run: a dead one is named, and no request is sent", async () => {
    const seen: string[] = [];
    const server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ object: "list", data: [{ id: "m", object: "model" }] }));
    });
    await new Promise<void>((res) => server.listen(0, "127.0.0.1", res));
    const live = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // A port nothing listens on (fetch refuses port 1 itself, as unsafe).
    const gone = createServer();
    await new Promise<void>((res) => gone.listen(0, "127.0.0.1", res));
    const dead = `http://127.0.0.1:${(gone.address() as AddressInfo).port}`;
    await new Promise<void>((res) => gone.close(() => res()));
    try {
      const program = new Command("prefixmesh").exitOverride();
      registerBench(program);
      const args = ["bench", "--url", `${live},${dead}`, "--requests", "4"];
      const err = await program.parseAsync(["node", "prefixmesh", ...args]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(CliError);
      expect((err as CliError).exitCode).toBe(1);
      expect((err as CliError).message).toMatch(
        new RegExp(`^cannot reach ${dead}/v1/models: ECONNREFUSED.*client API`),
      );
      expect(seen.filter((s) => !s.startsWith("GET /v1/models"))).toEqual([]);
    } finally {
      await new Promise<void>((res) => server.close(() => res()));
    }
  });
});
