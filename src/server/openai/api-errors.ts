/** A 4xx thrown inside the API's handlers, and the one handler that turns every error into OpenAI's JSON body. */
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import { noteError } from "../observability/request-log.js";
import { ServiceError } from "../service.js";
import type { ApiErrorCode } from "./error-codes.js";
import { errorBody } from "./format.js";

/** Thrown inside handlers for a 4xx with an OpenAI-style body. */
export class BadRequest extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: ApiErrorCode | null = null,
    readonly type = "invalid_request_error",
  ) {
    super(message);
  }
}

/** Every error a handler throws as an OpenAI-style JSON body; a 500 (none of ours) logged as a bug. */
export function installErrorHandler(app: FastifyInstance, logger: FastifyBaseLogger | undefined): void {
  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
    if (err instanceof BadRequest) {
      noteError(req, err.code ?? err.type, err.message);
      return reply.status(err.status).send(errorBody(err.message, err.type, err.param, err.code));
    }
    if (err instanceof ServiceError) {
      noteError(req, err.code ?? err.type, err.message);
      if (err.retryAfterSec !== undefined) reply.header("retry-after", String(Math.ceil(err.retryAfterSec)));
      return reply.status(err.status).send(errorBody(err.message, err.type, null, err.code ?? null));
    }
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) logger?.error({ err }, "unhandled API error");
    const message = status === 500 ? "internal error" : err.message;
    // fastify's own refusals (a body too large, unparsable or of the wrong type) name themselves by code.
    noteError(req, err.code ?? (status === 500 ? "server_error" : "invalid_request_error"), err.message);
    return reply
      .status(status)
      .send(errorBody(message, status === 500 ? "server_error" : "invalid_request_error"));
  });
}
