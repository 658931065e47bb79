/** The shared cluster secret (shared-secret mode): parsing, generating and loading it from a file. */
import { randomBytes } from "node:crypto";
import { stat, writeFile } from "node:fs/promises";
import { readBounded } from "./ca.js";

export const MIN_SECRET_BYTES = 32;
const MAX_SECRET_BYTES = 1024;
const MAX_SECRET_FILE = 4096;

export class SecretError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SecretError";
  }
}

/**
 * Decodes a secret written as hex or base64 (surrounding whitespace ignored) and requires at least
 * 32 bytes: a short or human-chosen secret would make HMAC forgeable by brute force.
 */
export function parseSecret(text: string): Buffer {
  const s = text.trim();
  if (s.length === 0) throw new SecretError("the shared secret is empty");
  if (s.length > MAX_SECRET_BYTES * 2)
    throw new SecretError(`the shared secret is too long (at most ${MAX_SECRET_BYTES} bytes)`);
  let bytes: Buffer;
  if (/^[0-9a-fA-F]+$/.test(s) && s.length % 2 === 0) {
    bytes = Buffer.from(s, "hex");
  } else if (/^[A-Za-z0-9+/]+={0,2}$/.test(s) || /^[A-Za-z0-9_-]+={0,2}$/.test(s)) {
    bytes = Buffer.from(s, s.includes("-") || s.includes("_") ? "base64url" : "base64");
  } else {
    throw new SecretError(
      "the shared secret must be hex or base64 (generate one with 'prefixmesh certs secret')",
    );
  }
  if (bytes.length < MIN_SECRET_BYTES) {
    throw new SecretError(
      `the shared secret is ${bytes.length} bytes; at least ${MIN_SECRET_BYTES} random bytes are required ` +
        "(generate one with 'prefixmesh certs secret')",
    );
  }
  return bytes;
}

/** A fresh random secret, hex-encoded (32 bytes). */
export function generateSecret(): string {
  return randomBytes(MIN_SECRET_BYTES).toString("hex");
}

/** Reads and parses a secret file (bounded size). */
export async function loadSecretFile(path: string): Promise<Buffer> {
  const text = await readBounded(path, MAX_SECRET_FILE, "secret file").catch((err: Error) => {
    throw new SecretError(err.message);
  });
  try {
    return parseSecret(text);
  } catch (err) {
    throw new SecretError(`${path}: ${(err as Error).message}`);
  }
}

/** Writes a fresh secret to `path`, readable only by its owner; refuses to overwrite unless `force`. */
export async function writeSecretFile(path: string, force = false): Promise<void> {
  if (!force) {
    const present = await stat(path).then(
      () => true,
      () => false,
    );
    if (present) throw new SecretError(`${path} already exists (use --force to replace it)`);
  }
  await writeFile(path, `${generateSecret()}\n`, { mode: 0o600, flag: force ? "w" : "wx" });
}
