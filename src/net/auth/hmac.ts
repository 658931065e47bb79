/**
 * Shared-secret peer authentication for trusted LANs: each peer request carries an HMAC-SHA256 over
 * its method, path, the body's SHA-256 and every `x-prefixmesh-*` header it carries (sender,
 * destination node, timestamp and nonce among them), checked against a replay window and a bounded
 * nonce cache. Headers are covered by prefix, not by a list, so one added later is signed without
 * touching this file, and a header added, removed or altered on the path fails the check. The
 * destination is signed so a captured request cannot be replayed to another node. It authenticates
 * requests; it does not encrypt them (prompts cross in clear), which is why mutual TLS is the real mode.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { z } from "zod";
import { NODE_ID_PATTERN } from "../node-id.js";
import { ReplayCache } from "./replay-cache.js";
import { MIN_SECRET_BYTES } from "./secret.js";

/** Every header with this prefix is signed. */
export const SIGNED_HEADER_PREFIX = "x-prefixmesh-";
export const HEADER_SENDER = "x-prefixmesh-sender";
export const HEADER_DESTINATION = "x-prefixmesh-destination";
export const HEADER_TIMESTAMP = "x-prefixmesh-timestamp";
export const HEADER_NONCE = "x-prefixmesh-nonce";
export const HEADER_SIGNATURE = "x-prefixmesh-signature";

/**
 * The destination of a request sent before the far node's id is known (a discovery probe of an
 * address). Verifiers accept it only where the caller allows it (the hello, which changes nothing).
 */
export const ANY_DESTINATION = "*";

export const DEFAULT_WINDOW_MS = 30_000;
export const DEFAULT_MAX_NONCES = 100_000;
/** Signed headers on one request at most, and the longest value: bounds what a verifier hashes. */
export const MAX_SIGNED_HEADERS = 32;
export const MAX_SIGNED_HEADER_VALUE = 1024;

/** The signature input's first line: a change to what is signed changes it (and the protocol version). */
const SIGNATURE_CONTEXT = "prefixmesh-request/2";

/** A body's SHA-256 (hex), hashed as it arrived: a large body need not be hashed at once to verify. */
export interface BodyDigest {
  sha256: string;
}

export type PeerBody = Uint8Array | string | BodyDigest | undefined;

export interface SignInput {
  secret: Uint8Array;
  sender: string;
  /** The node the request is for (its id), or ANY_DESTINATION. */
  destination: string;
  method: string;
  /** Request path including any query string, exactly as the server will see it. */
  path: string;
  body?: PeerBody;
  /** The request's other headers: its `x-prefixmesh-*` ones are signed (names case-insensitive). */
  headers?: Readonly<Record<string, string>>;
  /** Milliseconds since the epoch (injected). */
  now: number;
  /** Defaults to 16 random bytes, hex. */
  nonce?: string;
}

/** A type literal (not an interface) so it is assignable to header records. */
export type PeerAuthHeaders = {
  [HEADER_SENDER]: string;
  [HEADER_DESTINATION]: string;
  [HEADER_TIMESTAMP]: string;
  [HEADER_NONCE]: string;
  [HEADER_SIGNATURE]: string;
};

const AUTH_HEADERS = new Set([
  HEADER_SENDER,
  HEADER_DESTINATION,
  HEADER_TIMESTAMP,
  HEADER_NONCE,
  HEADER_SIGNATURE,
]);

const destinationSchema = z.union([z.literal(ANY_DESTINATION), z.string().regex(NODE_ID_PATTERN)]);
const headerSchema = z.object({
  sender: z.string().regex(NODE_ID_PATTERN),
  destination: destinationSchema,
  timestamp: z.string().regex(/^\d{1,15}$/),
  nonce: z.string().regex(/^[A-Za-z0-9_-]{16,128}$/),
  signature: z.string().regex(/^[0-9a-f]{64}$/),
});

/** Visible ASCII and inner spaces only: what an HTTP parser hands back unchanged (it trims the ends). */
const SIGNABLE_VALUE = /^(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?$/;

/** Signs a peer request; send the returned headers with it (beside `input.headers`). */
export function signPeerRequest(input: SignInput): PeerAuthHeaders {
  checkSecret(input.secret);
  const nonce = input.nonce ?? randomBytes(16).toString("hex");
  const timestamp = String(Math.floor(input.now));
  const fields = {
    sender: input.sender,
    destination: input.destination,
    timestamp,
    nonce,
    signature: "0".repeat(64),
  };
  const parsed = headerSchema.safeParse(fields);
  if (!parsed.success) {
    throw new Error(
      `cannot sign peer request: invalid ${String(parsed.error.issues[0]?.path[0] ?? "field")}`,
    );
  }
  const auth = {
    [HEADER_SENDER]: input.sender,
    [HEADER_DESTINATION]: input.destination,
    [HEADER_TIMESTAMP]: timestamp,
    [HEADER_NONCE]: nonce,
  };
  const signed = new Map<string, string>(Object.entries(auth));
  for (const [name, value] of Object.entries(input.headers ?? {})) {
    const n = name.toLowerCase();
    if (!n.startsWith(SIGNED_HEADER_PREFIX)) continue;
    if (AUTH_HEADERS.has(n)) throw new Error(`cannot sign peer request: '${n}' is set by signing`);
    if (signed.has(n)) throw new Error(`cannot sign peer request: '${n}' given twice`);
    if (!SIGNABLE_VALUE.test(value) || value.length > MAX_SIGNED_HEADER_VALUE)
      throw new Error(`cannot sign peer request: '${n}' has a value a server would not see as sent`);
    signed.set(n, value);
  }
  if (signed.size > MAX_SIGNED_HEADERS)
    throw new Error(`cannot sign peer request: over ${MAX_SIGNED_HEADERS} ${SIGNED_HEADER_PREFIX}* headers`);
  const signature = mac(input.secret, input.method, input.path, input.body, signed);
  return { ...auth, [HEADER_SIGNATURE]: signature.toString("hex") };
}

export type VerifyFailure =
  | "missing"
  | "stale"
  | "replay"
  | "bad-signature"
  | "malformed"
  | "wrong-destination"
  /** Signed as protocol 1 did (no destination): a node of the previous version. */
  | "old-protocol";
export type VerifyResult =
  | { ok: true; sender: string }
  /**
   * `clockMs`: for a timestamp outside the window, the verifier's clock (epoch ms), which its refusal
   * tells the sender so the sender can name its clock skew (a timestamp at or below the replay floor
   * is `stale` without it: that is a replay or a restarted sender, not a clock).
   */
  | { ok: false; reason: VerifyFailure; clockMs?: number };

export interface VerifyInput {
  method: string;
  path: string;
  /** Request headers as Node gives them (lower-case names). */
  headers: Readonly<Record<string, string | string[] | undefined>>;
  body?: PeerBody;
  now: number;
  /** This request may be addressed to ANY_DESTINATION (the caller knows it changes nothing). */
  anyDestination?: boolean;
}

export interface VerifierOptions {
  secret: Uint8Array;
  /** This node's id: requests signed for another node are refused. */
  self: string;
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
  private readonly self: string;
  private readonly windowMs: number;
  private readonly nonces: ReplayCache;
  private readonly counts: Record<VerifyFailure | "ok", number> = {
    ok: 0,
    missing: 0,
    stale: 0,
    replay: 0,
    "bad-signature": 0,
    malformed: 0,
    "wrong-destination": 0,
    "old-protocol": 0,
  };

  constructor(opts: VerifierOptions) {
    checkSecret(opts.secret);
    if (!NODE_ID_PATTERN.test(opts.self)) throw new RangeError(`invalid node id '${opts.self}'`);
    this.secret = Uint8Array.from(opts.secret);
    this.self = opts.self;
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

  /** Nonces held by the replay cache (bounded by `maxNonces`). */
  get remembered(): number {
    return this.nonces.size;
  }

  private check({ method, path, headers, body, now, anyDestination }: VerifyInput): VerifyResult {
    const raw = {
      sender: headers[HEADER_SENDER],
      destination: headers[HEADER_DESTINATION],
      timestamp: headers[HEADER_TIMESTAMP],
      nonce: headers[HEADER_NONCE],
      signature: headers[HEADER_SIGNATURE],
    };
    if (raw.destination === undefined && raw.sender && raw.timestamp && raw.nonce && raw.signature)
      return fail("old-protocol");
    if (Object.values(raw).some((v) => v === undefined)) return fail("missing");
    const parsed = headerSchema.safeParse(raw); // arrays (repeated headers) and oversize values fail here
    if (!parsed.success) return fail("malformed");
    const { sender, destination, timestamp, nonce, signature } = parsed.data;
    if (/[\r\n]/.test(method) || /[\r\n]/.test(path)) return fail("malformed");
    const signed = signedHeaders(headers);
    if (signed === undefined) return fail("malformed");
    const ts = Number(timestamp);
    if (Math.abs(now - ts) > this.windowMs) return { ok: false, reason: "stale", clockMs: Math.floor(now) };
    if (ts <= this.nonces.floor) return fail("stale");
    if (destination !== this.self && !(destination === ANY_DESTINATION && anyDestination))
      return fail("wrong-destination");
    const expected = mac(this.secret, method, path, body, signed);
    if (!timingSafeEqual(expected, Buffer.from(signature, "hex"))) return fail("bad-signature");
    // Keyed by destination too: the wildcard's nonces are not this node's own.
    const key = `${destination}\n${sender}\n${nonce}`;
    if (this.nonces.has(key)) return fail("replay");
    this.nonces.add(key, ts, now);
    return { ok: true, sender };
  }
}

function fail(reason: VerifyFailure): VerifyResult {
  return { ok: false, reason };
}

/**
 * The received `x-prefixmesh-*` headers but the signature, or undefined if one is repeated (Node gives
 * an array, or joins the values) in a way that cannot be what was signed, or there are too many.
 */
function signedHeaders(headers: VerifyInput["headers"]): Map<string, string> | undefined {
  const out = new Map<string, string>();
  for (const [name, value] of Object.entries(headers)) {
    if (!name.startsWith(SIGNED_HEADER_PREFIX) || name === HEADER_SIGNATURE) continue;
    if (typeof value !== "string" || value.length > MAX_SIGNED_HEADER_VALUE) return undefined;
    if (out.size === MAX_SIGNED_HEADERS) return undefined;
    out.set(name, value);
  }
  return out;
}

/**
 * The signature: one line each for the context, method, path, the body's digest, the number of signed
 * headers and then each as `name:value`, sorted by name. No field can contain a newline (validated)
 * and no name a colon, so the encoding is unambiguous.
 */
function mac(
  secret: Uint8Array,
  method: string,
  path: string,
  body: PeerBody,
  headers: ReadonlyMap<string, string>,
): Buffer {
  if (/[\r\n]/.test(method) || /[\r\n]/.test(path))
    throw new Error("method and path must not contain newlines");
  const digest =
    typeof body === "object" && !(body instanceof Uint8Array)
      ? body.sha256
      : createHash("sha256")
          .update(body ?? "")
          .digest("hex");
  const lines = [SIGNATURE_CONTEXT, method.toUpperCase(), path, digest, String(headers.size)];
  for (const name of [...headers.keys()].sort()) lines.push(`${name}:${headers.get(name)}`);
  return createHmac("sha256", secret).update(lines.join("\n")).digest();
}

function checkSecret(secret: Uint8Array): void {
  if (secret.length < MIN_SECRET_BYTES) {
    throw new RangeError(
      `the shared secret must be at least ${MIN_SECRET_BYTES} bytes, got ${secret.length}`,
    );
  }
}

/** Header of a hello request asking the answering node to prove its id (mesh verification). */
export const HEADER_CHALLENGE = "x-prefixmesh-challenge";
/** Header of the hello answer carrying that proof. */
export const HEADER_PROOF = "x-prefixmesh-proof";
const PROOF_CONTEXT = "prefixmesh-hello-proof/1";

/**
 * A signed request authenticates its sender, not the answer: a node verifying a member it heard of
 * through a relay asks that member's hello with a random challenge, and the member proves it holds the
 * shared secret by an HMAC over its own id, the asker's id, the challenge and the answer's body.
 */
export function helloProof(
  secret: Uint8Array,
  responder: string,
  requester: string,
  challenge: string,
  body: string,
): string {
  const bodyHash = createHash("sha256").update(body).digest("hex");
  return createHmac("sha256", secret)
    .update(`${PROOF_CONTEXT}\n${responder}\n${requester}\n${challenge}\n${bodyHash}`)
    .digest("hex");
}

/** Whether `proof` is `helloProof` of these fields (constant time). */
export function checkHelloProof(
  secret: Uint8Array,
  responder: string,
  requester: string,
  challenge: string,
  body: string,
  proof: string | undefined,
): boolean {
  if (typeof proof !== "string" || !/^[0-9a-f]{64}$/.test(proof)) return false;
  const want = Buffer.from(helloProof(secret, responder, requester, challenge, body), "hex");
  return timingSafeEqual(want, Buffer.from(proof, "hex"));
}
