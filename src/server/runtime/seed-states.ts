/**
 * What became of each `--join` seed, for `/cluster`: an operator whose node never joined sees what it
 * was told to join through and why each seed did not take. mesh-seeds.ts records every hello attempt
 * here; nothing here retries or decides anything.
 */
import { CLOCK_SKEW } from "../../core/refusals.js";
import { boundedAddress, MAX_PROBE_ADDRESSES, type ProbeAddresses } from "../../net/probe-addresses.js";
import { TransportError } from "../../net/transport-error.js";

/**
 * `pending`: no attempt has ended yet; `joined`: it answered with a hello of our cluster and was handed
 * to SWIM under its id; `unresolvable`: its name does not resolve (yet); `unreachable`: no answer;
 * `refused`: it answered, but not with a hello we take (another cluster, model or protocol, or our
 * credentials refused); `self`: the address is this node's own.
 */
export type SeedState = "pending" | "joined" | "unresolvable" | "unreachable" | "refused" | "self";

export interface SeedView {
  /** Its URL's host (`new URL(url).host`): lower-cased, without the scheme's default port. */
  seed: string;
  url: string;
  state: SeedState;
  /**
   * Whether it is still being asked: only joining or finding our own address ends the asking (a
   * refused seed is asked again after a growing backoff).
   */
  retrying: boolean;
  /** When it is asked next (ISO 8601), null once the asking ended or before the first attempt. */
  nextAttemptAt: string | null;
  attempts: number;
  /** When the last attempt ended (ISO 8601), null before. */
  lastAttemptAt: string | null;
  /**
   * Why the last attempt failed: the transport's error or the refusal (at most MAX_ERROR_CHARS); null
   * after a success.
   */
  error: string | null;
  /**
   * For `refused`: the hello check's reason (`wrong-cluster`, …), `clock-skew` (a 401 refusing our
   * signed timestamp: `error` says by how much the clocks differ), `wrong-port` (it answers as an
   * API port, or TLS against plain, or plain against TLS) or the HTTP status it answered.
   */
  reason: string | null;
  /** The member id it turned out to be (from its hello), null while unknown. */
  memberId: string | null;
  /**
   * What its host resolved to in the last attempt (an address literal: itself), at most
   * MAX_PROBE_ADDRESSES, each at most MAX_ADDRESS_CHARS; empty before, or if it resolved to nothing.
   */
  addresses: string[];
  /** The address the last attempt connected to, null if it reached none. */
  reached: string | null;
}

/** `reason` of a seed whose address answers as no peer port this node can use (net/wrong-port.ts). */
export const WRONG_PORT = "wrong-port";
/** A seed whose TLS handshake failed on a certificate: another cluster CA, or one expired. */
export const CERTIFICATE = "certificate";

/** The transport's failures for a name DNS does not know (yet), or could not ask about just now. */
export const UNRESOLVED = /\b(ENOTFOUND|EAI_AGAIN|EAI_NONAME|EAI_NODATA|ENODATA)\b/;

/** Most characters of an error kept: whatever answered at a seed's address may have said a lot. */
export const MAX_ERROR_CHARS = 200;

export class SeedStates {
  private readonly seeds = new Map<string, SeedView>();

  constructor(urls: readonly string[]) {
    for (const url of urls)
      this.seeds.set(url, {
        seed: new URL(url).host,
        url,
        state: "pending",
        retrying: true,
        nextAttemptAt: null,
        attempts: 0,
        lastAttemptAt: null,
        error: null,
        reason: null,
        memberId: null,
        addresses: [],
        reached: null,
      });
  }

  /**
   * The hello at `url` answered as `id`: accepted (`joined`), ourselves, or refused (its check's
   * verdict; asked again at `nextAt`, epoch ms).
   */
  answered(
    url: string,
    id: string | null,
    outcome: "joined" | "self" | { reason: string; message: string },
    seen?: ProbeAddresses,
    nextAt?: number,
  ): void {
    const refused = typeof outcome === "object";
    this.note(url, {
      ...where(seen),
      state: refused ? "refused" : outcome,
      retrying: refused,
      nextAttemptAt: refused && nextAt !== undefined ? new Date(nextAt).toISOString() : null,
      memberId: id,
      error: refused ? bounded(outcome.message) : null,
      reason: refused ? outcome.reason : null,
    });
  }

  /** The hello at `url` failed with `err`; it is asked again (at `nextAt`, epoch ms). */
  failed(url: string, err: Error, seen?: ProbeAddresses, nextAt?: number): void {
    const refusedBy = err instanceof TransportError && err.kind === "http" ? err.status : undefined;
    const wrong = err instanceof TransportError && err.wrongAddress;
    const cert = err instanceof TransportError && err.certRefused;
    const state: SeedState = UNRESOLVED.test(err.message)
      ? "unresolvable"
      : wrong || cert || refusedBy !== undefined || (err instanceof TransportError && err.kind === "protocol")
        ? "refused"
        : "unreachable";
    const skewed = err instanceof TransportError && err.clockSkewMs !== undefined;
    const reason =
      state !== "refused"
        ? null
        : wrong
          ? WRONG_PORT
          : cert
            ? CERTIFICATE
            : skewed
              ? CLOCK_SKEW
              : refusedBy !== undefined
                ? `http-${refusedBy}`
                : "protocol";
    const nextAttemptAt = nextAt !== undefined ? new Date(nextAt).toISOString() : null;
    this.note(url, {
      ...where(seen),
      state,
      retrying: true,
      nextAttemptAt,
      error: bounded(err.message),
      reason,
    });
  }

  view(): SeedView[] {
    return [...this.seeds.values()].map((s) => ({ ...s, addresses: [...s.addresses] }));
  }

  private note(url: string, change: Partial<SeedView>): void {
    const s = this.seeds.get(url);
    if (!s) return;
    if (change.state !== undefined) {
      s.attempts++;
      s.lastAttemptAt = new Date().toISOString();
    }
    Object.assign(s, change);
  }
}

/** The addresses an attempt saw, as a view holds them (within the bounds whoever filled `seen`). */
function where(seen: ProbeAddresses | undefined): Pick<SeedView, "addresses" | "reached"> {
  const addresses = (seen?.resolved ?? []).slice(0, MAX_PROBE_ADDRESSES).map(boundedAddress);
  const reached = seen?.reached;
  return { addresses, reached: reached === undefined ? null : boundedAddress(reached) };
}

/** `text` cut to MAX_ERROR_CHARS with an ellipsis (never splitting a surrogate pair). */
function bounded(text: string): string {
  if (text.length <= MAX_ERROR_CHARS) return text;
  return `${text.slice(0, MAX_ERROR_CHARS - 1).replace(/[\uD800-\uDBFF]$/, "")}…`;
}
