/**
 * Answer integrity in shared-secret mode. A signed request authenticates its sender, not what comes
 * back; so the serving node authenticates its HTTP answer to each signed request with channel-mac.ts's
 * construction, keyed from the secret and that request's binding (its nonce, sender and destination):
 * payload 0 is the head — status, every `x-prefixmesh-*` response header (the forward's ack epoch
 * among them) and, for a body sent whole, the body's digest — whose tag travels as
 * `x-prefixmesh-response-mac`; payloads 1.. are a streamed answer's NDJSON records, each line
 * prefixed with its tag. An answer altered, injected, reordered, truncated mid-record or taken from
 * another request (or node) fails the origin's check, which treats it as a garbled answer: an error,
 * never an altered one. (mTLS: TLS already gives this; insecure: nothing does.)
 */
import { createHash } from "node:crypto";
import { bindingLabel, FRAME_TAG_BYTES, type SequencedMac, sequencedMac } from "./channel-mac.js";
import { HEADER_DESTINATION, HEADER_NONCE, HEADER_SENDER, SIGNED_HEADER_PREFIX } from "./hmac.js";

/** The head's tag (hex). Itself an `x-prefixmesh-*` header, so left out of what it covers. */
export const HEADER_RESPONSE_MAC = "x-prefixmesh-response-mac";
/** What the keys are derived under: a change to what is covered changes it (and the protocol version). */
const RESPONSE_CONTEXT = "prefixmesh-response/1";
const TAG_HEX = FRAME_TAG_BYTES * 2;

type HeaderBag = Readonly<Record<string, string | string[] | number | undefined>>;

export interface ResponseSealer {
  /** The response-MAC header value for this head (and whole body, if it has one). Call first, once. */
  head(status: number, headers: HeaderBag, body?: Uint8Array | string): string;
  /** An NDJSON record line as sent: its tag, a space, the line. */
  record(line: string): string;
}

export interface ResponseOpener {
  /** Whether the head (and whole body, if given) is the serving node's answer to our request. */
  head(status: number, headers: HeaderBag, body?: Uint8Array | string): boolean;
  /** A received record line (without its newline) as sent, or undefined when its tag is wrong. */
  record(line: string): string | undefined;
}

/**
 * The binding of a signed request, read from its auth headers (as signed by us, or as verified by
 * the serving side), or undefined when it is not a signed request.
 */
export function requestBinding(
  headers: HeaderBag,
): { nonce: string; client: string; server: string } | undefined {
  const nonce = headers[HEADER_NONCE];
  const client = headers[HEADER_SENDER];
  const server = headers[HEADER_DESTINATION];
  if (typeof nonce !== "string" || typeof client !== "string" || typeof server !== "string") return undefined;
  return { nonce, client, server };
}

function macFor(secret: Uint8Array, requestHeaders: HeaderBag, side: "client" | "server"): SequencedMac {
  const binding = requestBinding(requestHeaders);
  if (!binding) throw new Error("a response is authenticated only against a signed request");
  return sequencedMac(secret, `${RESPONSE_CONTEXT}|${bindingLabel(binding)}`, side);
}

/** The serving side's: authenticates its answer to the (verified) request with these headers. */
export function responseSealer(secret: Uint8Array, requestHeaders: HeaderBag): ResponseSealer {
  const mac = macFor(secret, requestHeaders, "server");
  return {
    head: (status, headers, body) => mac.tag(headPayload(status, headers, body)).toString("hex"),
    record: (line) => `${mac.tag(line).toString("hex")} ${line}`,
  };
}

/** The origin's: checks the answer to the request it signed with these headers. */
export function responseOpener(secret: Uint8Array, requestHeaders: HeaderBag): ResponseOpener {
  const mac = macFor(secret, requestHeaders, "client");
  return {
    head(status, headers, body) {
      const tag = headers[HEADER_RESPONSE_MAC];
      if (typeof tag !== "string" || !/^[0-9a-f]+$/.test(tag) || tag.length !== TAG_HEX) return false;
      return mac.check(Buffer.from(tag, "hex"), headPayload(status, headers, body));
    },
    record(line) {
      if (line.length <= TAG_HEX || line[TAG_HEX] !== " ") return undefined;
      const tag = Buffer.from(line.slice(0, TAG_HEX), "hex");
      if (tag.length !== FRAME_TAG_BYTES) return undefined; // not hex
      const rest = line.slice(TAG_HEX + 1);
      return mac.check(tag, rest) ? rest : undefined;
    },
  };
}

/**
 * One line each: the status, the number of covered headers, each as `name:value` sorted by name
 * (a repeated header as its values joined by newlines: it cannot match what was sent as one), and
 * the body's SHA-256 or `-` for a streamed body (its records carry their own tags).
 */
function headPayload(status: number, headers: HeaderBag, body: Uint8Array | string | undefined): string {
  const covered: string[] = [];
  for (const [name, value] of Object.entries(headers)) {
    const n = name.toLowerCase();
    if (!n.startsWith(SIGNED_HEADER_PREFIX) || n === HEADER_RESPONSE_MAC || value === undefined) continue;
    covered.push(`${n}:${Array.isArray(value) ? value.join("\n") : String(value)}`);
  }
  covered.sort();
  const digest = body === undefined ? "-" : createHash("sha256").update(body).digest("hex");
  return [String(status), String(covered.length), ...covered, digest].join("\n");
}
