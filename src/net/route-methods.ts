/**
 * The methods each route path of a fastify app answers, for `405 Method Not Allowed` (both ports): a
 * known path asked with another method is a caller's mistake worth naming, not "no such route".
 */
import type { FastifyInstance } from "fastify";

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
 * gives the methods a path (query string ignored) answers, sorted and joined for an `Allow` header,
 * or undefined for a path no route serves.
 */
export function trackRouteMethods(app: FastifyInstance): (url: string) => string | undefined {
  const byUrl = new Map<string, PathMethods>();
  app.addHook("onRoute", (route) => {
    let entry = byUrl.get(route.url);
    if (!entry) {
      entry = { pattern: pathPattern(route.url), methods: new Set() };
      byUrl.set(route.url, entry);
    }
    for (const m of [route.method].flat()) entry.methods.add(m);
  });
  return (url) => {
    const path = url.split("?")[0] ?? "";
    const methods = new Set<string>();
    for (const e of byUrl.values()) if (e.pattern.test(path)) for (const m of e.methods) methods.add(m);
    return methods.size > 0 ? [...methods].sort().join(", ") : undefined;
  };
}
