/** The client API's fastify instance, with fastify's own pre-routing refusals in OpenAI's error shape. */
import Fastify, { type FastifyInstance } from "fastify";
import { refuseConnect } from "../../net/connect-method.js";
import { frameworkAnswerOptions, refuseBeforeRoutes } from "../../net/framework-answers.js";
import { BadRequest } from "./api-errors.js";
import { errorBody } from "./format.js";

/** OpenAI's error shape for a refusal made before any route (malformed HTTP, a bad URL, closing). */
const apiErrorBody = (message: string, status: number) =>
  errorBody(message, status >= 500 ? "server_error" : "invalid_request_error");

export function createApiApp(bodyLimit: number | undefined): FastifyInstance {
  const app = Fastify({
    bodyLimit: bodyLimit ?? 4 * 1024 * 1024,
    // Our own pino logger logs what matters; per-request access logs would dominate the router overhead.
    logger: false,
    // Such keys are valid JSON and, like any unknown field, ignored: dropped, not refused as no JSON.
    onProtoPoisoning: "remove",
    onConstructorPoisoning: "remove",
    ...frameworkAnswerOptions(apiErrorBody),
  }) as unknown as FastifyInstance;
  refuseConnect(app.server, (message) => apiErrorBody(message, 405));
  refuseBeforeRoutes(app, apiErrorBody);
  app.addHook("preParsing", async (req) => {
    const enc = req.headers["content-encoding"]?.trim().toLowerCase();
    const hasBody =
      req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"]) > 0;
    // Nothing here decodes a compressed body: read as JSON it would be refused as no JSON at all.
    if (hasBody && enc !== undefined && enc !== "" && enc !== "identity")
      throw new BadRequest(
        415,
        `content-encoding '${enc.slice(0, 64)}' is not supported: send the body uncompressed`,
      );
  });
  return app;
}
