/**
 * The client request id (`x-request-id`): taken from the client when it sends a valid one, else made
 * here; returned on every response and carried on forwards, so one request can be followed across
 * nodes in the logs. Bounded and restricted to a safe alphabet: it is echoed in headers and logs.
 */
import { randomUUID } from "node:crypto";
import { REQUEST_ID_PATTERN } from "../../net/wire-schemas.js";

export const REQUEST_ID_HEADER = "x-request-id";
export const MAX_REQUEST_ID_LENGTH = 128;
export { REQUEST_ID_PATTERN };

export type RequestIdChoice = { ok: true; id: string } | { ok: false; id: string; error: string };

/**
 * The id of a request from its `x-request-id` header value(s). An invalid one is refused (the caller
 * answers 400) but a fresh id is still made, so even that refusal can be found in the logs.
 */
export function chooseRequestId(header: string | string[] | undefined): RequestIdChoice {
  if (header === undefined) return { ok: true, id: randomUUID() };
  const value = Array.isArray(header) ? header : [header];
  if (value.length !== 1) {
    return { ok: false, id: randomUUID(), error: `${REQUEST_ID_HEADER} must be given once` };
  }
  const v = value[0] as string;
  if (!REQUEST_ID_PATTERN.test(v)) {
    return {
      ok: false,
      id: randomUUID(),
      error:
        `${REQUEST_ID_HEADER} must be 1-${MAX_REQUEST_ID_LENGTH} characters of letters, digits and ` +
        "._~:@+=/- (got an invalid value)",
    };
  }
  return { ok: true, id: v };
}
