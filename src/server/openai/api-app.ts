/** The client API's fastify instance, with fastify's own pre-routing refusals in OpenAI's error shape. */
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { refuseConnect } from "../../net/connect-method.js";
import { errorBody } from "./format.js";

/**
 * A path that is no valid percent-encoding never reaches a route or the error handler; without this
 * its 400 would carry fastify's own body, which OpenAI clients cannot read.
 */
function frameworkError(err: Error, _req: FastifyRequest, reply: FastifyReply): void {
  reply.status(400).send(errorBody(err.message, "invalid_request_error"));
}

export function createApiApp(bodyLimit: number | undefined): FastifyInstance {
  const app = Fastify({
    bodyLimit: bodyLimit ?? 4 * 1024 * 1024,
    // Our own pino logger logs what matters; per-request access logs would dominate the router overhead.
    logger: false,
    frameworkErrors: frameworkError,
  }) as unknown as FastifyInstance;
  refuseConnect(app.server, (message) => errorBody(message, "invalid_request_error"));
  return app;
}
