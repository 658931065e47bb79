/**
 * Whether an answer the peer client (transport-client.ts) took whole is the serving node's answer to
 * its request, and not a refusal: else a classified TransportError.
 */
import { HEADER_RESPONSE_MAC } from "./auth/response-mac.js";
import { clockSkewOf, describeSkew } from "./clock-skew.js";
import type { PeerAuth } from "./transport-auth.js";
import { TransportError } from "./transport-error.js";
import { wrongPortAnswer } from "./wrong-port.js";

/**
 * An answer taken whole must be the serving node's to this request (shared-secret mode): a wrong,
 * missing or moved response MAC makes it garbage, as a malformed answer is. A node older than
 * protocol 3 sends none, so the message says so (its hello cannot be trusted to say its version).
 */
export function checkAnswer(
  who: string,
  auth: PeerAuth,
  /** The headers our request was sent with (its response MAC is bound to them). */
  sent: Readonly<Record<string, string>>,
  res: { statusCode: number; headers: Readonly<Record<string, string | string[] | undefined>> },
  body: Uint8Array,
  /** What a refusal is said to (`PATH: body`), for its message. */
  what: string,
  /** The one status that answers (a hello's 200); otherwise any below 300 does. */
  wantStatus?: number,
): void {
  const opener = auth.responseOpener(sent);
  const authentic = !opener || opener.head(res.statusCode, res.headers, body);
  // A refusal is an HTTP error either way; unsealed, it is no verdict of the peer's.
  if (wantStatus === undefined ? res.statusCode >= 300 : res.statusCode !== wantStatus) {
    // Only where requests carry a timestamp: shared-secret mode. Said before the body, which a
    // shown error is cut within (seed-states.ts).
    const skew = auth.clock ? clockSkewOf(res.statusCode, res.headers, body, auth.clock()) : undefined;
    const clock =
      skew === undefined ? "" : ` (clock skew: this node's clock is ${describeSkew(skew)} the peer's)`;
    // Said first, so a message cut short (seed-states.ts) still names the mistake.
    const wrong = wrongPortAnswer(res.statusCode, body);
    throw new TransportError(
      "http",
      `${who}${wrong === undefined ? "" : `: ${wrong};`} answered ${res.statusCode}${clock} to ${what}${authentic ? "" : UNAUTHENTICATED}`,
      res.statusCode,
      !authentic,
      skew,
      undefined,
      wrong !== undefined,
    );
  }
  if (authentic) return;
  const why =
    res.headers[HEADER_RESPONSE_MAC] === undefined
      ? "carries no response MAC (a peer older than protocol 3, or altered on the path)"
      : "fails its response MAC";
  throw new TransportError("protocol", `${who}: answer ${why}`, undefined, true);
}

/** Said of a refusal that carried no valid response MAC. */
export const UNAUTHENTICATED = " (not authenticated: no valid response MAC)";
