/**
 * Shared-secret peer authentication for trusted LANs: each peer request carries an HMAC-SHA256 over
 * method, path, timestamp, nonce, sender id and the body's SHA-256, checked against a replay window and
 * a bounded nonce cache. It authenticates requests; it does not encrypt them (prompts cross in clear),
 * which is why mutual TLS is the real mode.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { NODE_ID_PATTERN } from "../node-id.js";
import { ReplayCache } from "./replay-cache.js";
import { MIN_SECRET_BYTES } from "./secret.js";

export const HEADER_SENDER = "x-prefixmesh-sender";
export const HEADER_TIMESTAMP = "x-prefixmesh-timestamp";
export const HEADER_NONCE = "x-prefixmesh-nonce";
export const HEADER_SIGNATURE = "x-prefixmesh-signature";

export const DEFAULT_WINDOW_MS = 30_000;
export const DEFAULT_MAX_NONCES = 100_000;

export type PeerBody = Uint8Array | string | undefined;

export interface SignInput {
  secret: Uint8Array;
  sender: string;
  method: string;
  /** Request path including any query string, exactly as the server will see it. */
  path: string;
  body?: PeerBody;
  /** Milliseconds since the epoch (injected). */
  now: number;
  /** Defaults to 16 random bytes, hex. */
  nonce?: string;
}

/** A type literal (not an interface) so it is assignable to header records. */
export type PeerAuthHeaders = {
  [HEADER_SENDER]: string;
  [HEADER_TIMESTAMP]: string;
  [HEADER_NONCE]: string;
  [HEADER_SIGNATURE]: string;
};

const headerSchema = z.object({
  sender: z.string().regex(NODE_ID_PATTERN),
  timestamp: z.string().regex(/^\d{1,15}$/),
  nonce: z.string().regex(/^[A-Za-z0-9_-]{16,128}$/),
  signature: z.string().regex(/^[0-9a-f]{64}$/),
});

/** Signs a peer request; send the returned headers with it. */
export function signPeerRequest(input: SignInput): PeerAuthHeaders {
  checkSecret(input.secret);
  const nonce = input.nonce ?? randomBytes(16).toString("hex");
  const timestamp = String(Math.floor(input.now));
  const fields = { sender: input.sender, timestamp, nonce, signature: "0".repeat(64) };
  const parsed = headerSchema.safeParse(fields);
  if (!parsed.success) {
    throw new Error(
      `cannot sign peer request: invalid ${String(parsed.error.issues[0]?.path[0] ?? "field")}`,
    );
  }
  const signature = mac(input.secret, input.method, input.path, timestamp, nonce, input.sender, input.body);
  return {
    [HEADER_SENDER]: input.sender,
    [HEADER_TIMESTAMP]: timestamp,
    [HEADER_NONCE]: nonce,
    [HEADER_SIGNATURE]: signature.toString("hex"),
  };
}

export type VerifyFailure = "missing" | "stale" | "replay" | "bad-signature" | "malformed";
export type VerifyResult = { ok: true; sender: string } | { ok: false; reason: VerifyFailure };

export interface VerifyInput {
  method: string;
  path: string;
  /** Request headers as Node gives them (lower-case names). */
  headers: Readonly<Record<string, string | string[] | undefined>>;
  body?: PeerBody;
  now: number;
}

export interface VerifierOptions {
  secret: Uint8Array;
  /** Accepted clock difference either way (default ±30 s). */
  windowMs?: number;
  /** Nonces remembered at most (default 100 000, a few MB). */
  maxNonces?: number;
}

/**
 * Verifies signed peer requests. Checks run cheapest-first and the nonce is recorded only after the
 * signature verifies, so forged requests cannot fill the replay cache.
 */
export class PeerRequestVerifier {
  private readonly secret: Uint8Array;
  private readonly windowMs: number;
  private readonly nonces: ReplayCache;
  private readonly counts: Record<VerifyFailure | "ok", number> = {
    ok: 0,
    missing: 0,
    stale: 0,
    replay: 0,
    "bad-signature": 0,
    malformed: 0,
  };

  constructor(opts: VerifierOptions) {
    checkSecret(opts.secret);
    this.secret = Uint8Array.from(opts.secret);
    this.windowMs = opts.windowMs ?? DEFAULT_WINDOW_MS;
    if (!(this.windowMs > 0 && this.windowMs <= 600_000))
      throw new RangeError("windowMs must be in (0, 600000]");
    this.nonces = new ReplayCache(this.windowMs, opts.maxNonces ?? DEFAULT_MAX_NONCES);
  }

  verify(input: VerifyInput): VerifyResult {
    const r = this.check(input);
    this.counts[r.ok ? "ok" : r.reason]++;
    return r;
  }

  /** Outcomes so far, for metrics (rejections are counted, as the issue asks). */
  stats(): Readonly<Record<VerifyFailure | "ok", number>> {
    return { ...this.counts };
  }

  private check({ method, path, headers, body, now }: VerifyInput): VerifyResult {
    const raw = {
      sender: headers[HEADER_SENDER],
      timestamp: headers[HEADER_TIMESTAMP],
      nonce: headers[HEADER_NONCE],
      signature: headers[HEADER_SIGNATURE],
    };
    if (Object.values(raw).some((v) => v === undefined)) return fail("missing");
    const parsed = headerSchema.safeParse(raw); // arrays (repeated headers) and oversize values fail here
    if (!parsed.success) return fail("malformed");
    const { sender, timestamp, nonce, signature } = parsed.data;
    if (/[\r\n]/.test(method) || /[\r\n]/.test(path)) return fail("malformed");
    const ts = Number(timestamp);
    if (Math.abs(now - ts) > this.windowMs || ts <= this.nonces.floor) return fail("stale");
    const expected = mac(this.secret, method, path, timestamp, nonce, sender, body);
    if (!timingSafeEqual(expected, Buffer.from(signature, "hex"))) return fail("bad-signature");
    const key = `${sender}\n${nonce}`;
    if (this.nonces.has(key)) return fail("replay");
    this.nonces.add(key, ts, now);
    return { ok: true, sender };
  }
}

function fail(reason: VerifyFailure): VerifyResult {
  return { ok: false, reason };
}

/** Newline-separated fields: none can contain a newline (validated), so the encoding is unambiguous. */
function mac(
  secret: Uint8Array,
  method: string,
  path: string,
  timestamp: string,
  nonce: string,
  sender: string,
  body: PeerBody,
): Buffer {
  if (/[\r\n]/.test(method) || /[\r\n]/.test(path))
    throw new Error("method and path must not contain newlines");
  const digest = createHash("sha256")
    .update(body ?? "")
    .digest("hex");
  return createHmac("sha256", secret)
    .update(["prefixmesh-v1", method.toUpperCase(), path, timestamp, nonce, sender, digest].join("\n"))
    .digest();
}

function checkSecret(secret: Uint8Array): void {
  if (secret.length < MIN_SECRET_BYTES) {
    throw new RangeError(
      `the shared secret must be at least ${MIN_SECRET_BYTES} bytes, got ${secret.length}`,
    );
  }
}
