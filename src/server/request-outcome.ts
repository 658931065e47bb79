/** How a failed client request is counted in `prefixmesh_requests_total` (metrics.ts). */
import { ServiceError } from "./service.js";

/**
 * `prefixmesh_requests_total`'s outcome of a request that failed with `err`: a client that hung up
 * (499) is `gone`, apart from `error`, so an alert on errors is not set off by clients giving up.
 */
export function failedOutcome(err: unknown): "overloaded" | "gone" | "error" {
  // Only a ServiceError's status is the client's answer: a peer's (TransportError) is answered 500.
  if (!(err instanceof ServiceError)) return "error";
  return err.status === 429 ? "overloaded" : err.status === 499 ? "gone" : "error";
}
