/**
 * The methods each route path answers, for `405 Method Not Allowed`: a known path asked with another
 * method is a client mistake worth naming (`POST /health`, `GET /v1/completions`), not "no such route".
 */
import type { FastifyInstance } from "fastify";
import { noteError } from "../observability/request-log.js";
import { errorBody } from "./format.js";

interface PathMethods {
  pattern: RegExp;
  methods: Set<string>;
}

/** A fastify route path as a regex: `:name` is one path segment, `*` the rest of the path. */
function pathPattern(url: string): RegExp {
  const body = url
    .split(/(:[A-Za-z0-9_]+|\*)/)
    .map((part) => {
      if (part === "*") return ".*";
      if (part.startsWith(":")) return "[^/]+";
      return part.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
    })
    .join("");
  return new RegExp(`^${body}$`);
}

/**
 * Records every route `app` registers from now on (call before the routes). The returned function
 * gives the methods a path answers, sorted, or undefined for a path no route serves.
 */
function trackRouteMethods(app: FastifyInstance): (path: string) => string[] | undefined {
  const byUrl = new Map<string, PathMethods>();
  app.addHook("onRoute", (route) => {
    let entry = byUrl.get(route.url);
    if (!entry) {
      entry = { pattern: pathPattern(route.url), methods: new Set() };
      byUrl.set(route.url, entry);
    }
    for (const m of [route.method].flat()) entry.methods.add(m);
  });
  return (path) => {
    const methods = new Set<string>();
    for (const e of byUrl.values()) if (e.pattern.test(path)) for (const m of e.methods) methods.add(m);
    return methods.size > 0 ? [...methods].sort() : undefined;
  };
}

/**
 * Answers what no route matches: 405 with `Allow` for a known path asked with another method, else
 * 404; both in OpenAI's error shape. Call before registering the routes.
 */
export function installNotFound(app: FastifyInstance): void {
  const methodsOf = trackRouteMethods(app);
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split("?")[0] ?? "";
    const allow = methodsOf(path)?.join(", ");
    if (allow) {
      const message = `${req.method} is not allowed on ${path}; allowed: ${allow}`;
      noteError(req, "method_not_allowed", message);
      return reply.status(405).header("allow", allow).send(errorBody(message, "invalid_request_error"));
    }
    noteError(req, "not_found", `no route ${req.method}`);
    return reply.status(404).send(errorBody(`no route ${req.method} ${req.url}`, "invalid_request_error"));
  });
}
