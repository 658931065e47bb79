/**
 * `prefixmesh certs`: cluster credentials. `init` makes the private cluster CA, `issue` a node
 * certificate (server + client), `secret` a shared secret for the simpler LAN mode.
 */
import type { Command } from "commander";
import { CertError, DEFAULT_CERTS_DIR, initCa, issueNodeCert } from "../net/auth/ca.js";
import { OpensslError } from "../net/auth/openssl.js";
import { SecretError, writeSecretFile } from "../net/auth/secret.js";
import { CliError, parseNumber } from "./errors.js";

export function registerCerts(program: Command): void {
  const certs = program.command("certs").description("create cluster credentials for peer authentication");

  certs
    .command("init")
    .description("create a private cluster CA (EC P-256) for mutual TLS between peers")
    .option("--dir <dir>", "credentials directory", DEFAULT_CERTS_DIR)
    .option("--cluster-id <id>", "cluster id written into the CA subject (default: random)")
    .option("--days <n>", "validity in days", "3650")
    .option("--force", "replace an existing CA (certificates it issued stop working)", false)
    .action(async (o: { dir: string; clusterId?: string; days: string; force: boolean }) => {
      const days = parseNumber("--days", o.days, { min: 1, max: 36_500, integer: true });
      const ca = await cliErrors(() => initCa(o.dir, { clusterId: o.clusterId, days, force: o.force }));
      out(`cluster CA created for cluster '${ca.clusterId}'`);
      out(`  certificate: ${ca.caCert}`);
      out(`  key:         ${ca.caKey} (mode 0600; keep it off the nodes if you can)`);
      out(`next: prefixmesh certs issue --dir ${o.dir} --id A`);
    });

  certs
    .command("issue")
    .description("issue a node certificate (identity = node id; usable as server and client certificate)")
    .requiredOption("--id <id>", "node id (1-64 characters from A-Z a-z 0-9 _ . -)")
    .option("--dir <dir>", "credentials directory holding the cluster CA", DEFAULT_CERTS_DIR)
    .option(
      "--san <list>",
      "extra IP addresses / DNS names, comma-separated (127.0.0.1, ::1, localhost are always in)",
    )
    .option("--days <n>", "validity in days", "825")
    .option("--force", "replace an existing certificate for this id", false)
    .action(async (o: { id: string; dir: string; san?: string; days: string; force: boolean }) => {
      const days = parseNumber("--days", o.days, { min: 1, max: 36_500, integer: true });
      const sans = (o.san ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");
      const c = await cliErrors(() => issueNodeCert(o.dir, o.id, { sans, days, force: o.force }));
      out(`certificate issued for node '${c.id}' in cluster '${c.clusterId}'`);
      out(`  certificate: ${c.cert}`);
      out(`  key:         ${c.key} (mode 0600)`);
      out(`  names:       prefixmesh://node/${c.id}, ${c.sans.join(", ")}`);
    });

  certs
    .command("secret")
    .description("write a fresh random shared secret (32 bytes, hex) for shared-secret mode")
    .requiredOption("--out <file>", "file to write (mode 0600)")
    .option("--force", "replace an existing file", false)
    .action(async (o: { out: string; force: boolean }) => {
      await cliErrors(() => writeSecretFile(o.out, o.force));
      out(`shared secret written to ${o.out} (mode 0600); give every node the same file via --secret-file`);
    });
}

function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** Turns the library's expected failures into one-line CLI errors (exit 2). */
async function cliErrors<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof CertError || err instanceof OpensslError || err instanceof SecretError) {
      throw new CliError(err.message);
    }
    const e = err as NodeJS.ErrnoException;
    if (e.code === "EACCES" || e.code === "ENOENT" || e.code === "ENOTDIR" || e.code === "EEXIST") {
      throw new CliError(e.message);
    }
    throw err;
  }
}
