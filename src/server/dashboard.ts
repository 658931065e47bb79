/**
 * The live dashboard every node serves at `/` and `/dashboard`: a static page, its script (compiled
 * with the rest of src/, served as-is: no bundler, nothing built at run time) and uPlot's files from
 * node_modules, so it works offline. A strict Content-Security-Policy: only this origin's scripts,
 * styles and fetches, no inline code.
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyReply } from "fastify";
import { PAGE_CSS, PAGE_HTML } from "./dashboard/page.js";
import { errorBody } from "./openai/format.js";

export const DASHBOARD_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const require = createRequire(import.meta.url);

/** Files served under /dashboard/: name → where it lies and its type. */
const ASSETS: Record<string, { path: () => string; type: string }> = {
  "app.js": { path: () => compiled("app.js"), type: "text/javascript; charset=utf-8" },
  "series.js": { path: () => compiled("series.js"), type: "text/javascript; charset=utf-8" },
  "charts.js": { path: () => compiled("charts.js"), type: "text/javascript; charset=utf-8" },
  "refused.js": { path: () => compiled("refused.js"), type: "text/javascript; charset=utf-8" },
  "departed.js": { path: () => compiled("departed.js"), type: "text/javascript; charset=utf-8" },
  "membership.js": { path: () => compiled("membership.js"), type: "text/javascript; charset=utf-8" },
  "membership-view.js": {
    path: () => compiled("membership-view.js"),
    type: "text/javascript; charset=utf-8",
  },
  "dom.js": { path: () => compiled("dom.js"), type: "text/javascript; charset=utf-8" },
  "uplot.js": {
    path: () => require.resolve("uplot/dist/uPlot.iife.min.js"),
    type: "text/javascript; charset=utf-8",
  },
  "uplot.css": { path: () => require.resolve("uplot/dist/uPlot.min.css"), type: "text/css; charset=utf-8" },
};

/** The browser script as the build emitted it next to this module (dist/server/dashboard/). */
function compiled(name: string): string {
  return fileURLToPath(new URL(`./dashboard/${name}`, import.meta.url));
}

const cache = new Map<string, string>();

async function asset(name: string): Promise<string | undefined> {
  const a = ASSETS[name];
  if (!a) return undefined;
  let body = cache.get(name);
  if (body === undefined) {
    body = await readFile(a.path(), "utf8");
    cache.set(name, body);
  }
  return body;
}

function secure(reply: FastifyReply, type: string): FastifyReply {
  return reply
    .header("content-security-policy", DASHBOARD_CSP)
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer")
    .header("cache-control", "no-cache")
    .type(type);
}

export function registerDashboard(app: FastifyInstance): void {
  const page = async (_req: unknown, reply: FastifyReply) =>
    secure(reply, "text/html; charset=utf-8").send(PAGE_HTML);
  app.get("/", page);
  app.get("/dashboard", page);
  app.get("/dashboard/app.css", async (_req, reply) =>
    secure(reply, "text/css; charset=utf-8").send(PAGE_CSS),
  );
  app.get<{ Params: { file: string } }>("/dashboard/:file", async (req, reply) => {
    const name = req.params.file;
    let body: string | undefined;
    try {
      body = await asset(name);
    } catch {
      // Run from src/ without a build (unit tests): the compiled script is not there.
      return reply
        .status(503)
        .send(errorBody(`dashboard file ${name} is missing: run 'npm run build'`, "server_error"));
    }
    if (body === undefined)
      return reply.status(404).send(errorBody(`no dashboard file ${name}`, "invalid_request_error"));
    return secure(reply, (ASSETS[name] as { type: string }).type).send(body);
  });
}
