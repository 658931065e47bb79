/** What the shared-secret signing tests sign: a fresh secret, a fixed clock and a snapshot body. */
import { signPeerRequest } from "../../src/net/auth/hmac.js";
import { generateSecret, parseSecret } from "../../src/net/auth/secret.js";

export const secret = parseSecret(generateSecret());
export const T0 = 1_800_000_000_000;
export const body = new TextEncoder().encode('{"snapshot":1}');

/** A request from A to B signed at T0, with `over` changing any of the signing inputs. */
export function signed(over: Partial<Parameters<typeof signPeerRequest>[0]> = {}) {
  return signPeerRequest({
    secret,
    sender: "A",
    destination: "B",
    method: "POST",
    path: "/peer/snapshot",
    body,
    now: T0,
    ...over,
  });
}
