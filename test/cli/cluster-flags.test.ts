/** `prefixmesh cluster`'s flags: an engine it cannot run is refused up front, and its help says which it runs. */
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { isLoopbackIp, registerCluster } from "../../src/cli/cluster.js";
import { CliError } from "../../src/cli/errors.js";

function program(): Command {
  const p = new Command("prefixmesh").exitOverride();
  registerCluster(p);
  return p;
}

describe("prefixmesh cluster --engine", () => {
  it("refuses openai (one remote server per node) as a usage error, before starting anything", async () => {
    const err = await program()
      .parseAsync(["node", "prefixmesh", "cluster", "--nodes", "2", "--engine", "openai"])
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).exitCode).toBe(2);
    expect((err as CliError).message).toMatch(/--engine openai .*prefixmesh node/);
  });

  it("refuses --model with --engine sim (which runs no model) before starting anything", async () => {
    const err = await program()
      .parseAsync(["node", "prefixmesh", "cluster", "--nodes", "2", "--engine", "sim", "--model", "m.gguf"])
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(CliError);
    expect((err as CliError).exitCode).toBe(2);
    expect((err as CliError).message).toMatch(/--model needs --engine llamacpp/);
  });

  it("refuses a --host that is no loopback address as a usage error, before binding anything", async () => {
    for (const host of ["10.0.0.1", "0.0.0.0", "localhost", "::"]) {
      const err = await program()
        .parseAsync(["node", "prefixmesh", "cluster", "--nodes", "2", "--engine", "sim", "--host", host])
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err, host).toBeInstanceOf(CliError);
      expect((err as CliError).exitCode).toBe(2);
      expect((err as CliError).message).toMatch(/--host must be a loopback address .*prefixmesh node/);
    }
    for (const host of ["127.0.0.1", "127.0.0.2", "::1"]) expect(isLoopbackIp(host), host).toBe(true);
  });

  it("lists in its help only the engines it runs", () => {
    const cluster = program().commands.find((c) => c.name() === "cluster");
    const engine = cluster?.options.find((o) => o.long === "--engine");
    expect(engine?.description).toBe("llamacpp | sim");
  });
});
