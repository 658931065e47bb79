/**
 * The client port's answer to what no route matches: `405 Method Not Allowed` for a known path asked
 * with another method (`POST /health`, `GET /v1/completions`: a client mistake worth naming, not "no
 * such route"), else 404.
 */
import type { FastifyInstance } from "fastify";
import { trackRouteMethods } from "../../net/route-methods.js";
import { noteError } from "../observability/request-log.js";
import { errorBody } from "./format.js";

/**
 * Answers what no route matches: 405 with `Allow` for a known path asked with another method, else
 * 404; both in OpenAI's error shape. Call before registering the routes.
 */
export function installNotFound(app: FastifyInstance): void {
  const allowedOn = trackRouteMethods(app);
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?")[0] ?? "";
    const allow = allowedOn(req.url);
    if (allow) {
      const message = `${req.method} is not allowed on ${path}; allowed: ${allow}`;
      noteError(req, "method_not_allowed", message);
      return reply.status(405).header("allow", allow).send(errorBody(message, "invalid_request_error"));
    }
    noteError(req, "not_found", `no route ${req.method}`);
    return reply.status(404).send(errorBody(`no route ${req.method} ${req.url}`, "invalid_request_error"));
  });
}
