/**
 * docs/api.md says what the code does: its route tables list exactly the routes each port serves, and
 * its error-code table exactly the `error.code`s the client API can send (API_ERROR_CODES, which
 * `errorBody` is typed against), each with its HTTP status(es).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { insecureAuth } from "../../src/net/transport-auth.js";
import { buildPeerServer } from "../../src/net/transport-server.js";
import { CHANNEL_PATH } from "../../src/net/transport-wire.js";
import { buildApi } from "../../src/server/api.js";
import { createMetrics } from "../../src/server/metrics.js";
import { API_ERROR_CODES } from "../../src/server/openai/error-codes.js";
import type { NodeService } from "../../src/server/service.js";

const root = new URL("../../", import.meta.url);
const doc = readFileSync(new URL("docs/api.md", root), "utf8");

/** The text between heading `from` and the next heading of the same or a higher level. */
function section(text: string, heading: string): string {
  const level = heading.match(/^#+/)?.[0].length ?? 2;
  const start = text.indexOf(`\n${heading}\n`);
  expect(start, `docs/api.md has no '${heading}'`).toBeGreaterThanOrEqual(0);
  const rest = text.slice(start + heading.length + 2);
  const end = rest.search(new RegExp(`\\n#{1,${level}} `));
  return end < 0 ? rest : rest.slice(0, end);
}

/** `METHOD /path` of each row of a markdown table whose first cell is one. */
const routeRows = (text: string) =>
  [...text.matchAll(/^\| `(GET|POST|PUT|PATCH|DELETE) (\/[^`]*)` \|/gm)].map((m) => `${m[1]} ${m[2]}`);

/** The routes of a fastify app, from its route tree (HEAD, added for every GET, left out). */
function routesOf(app: FastifyInstance): string[] {
  const out: string[] = [];
  const stack: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split("\n")) {
    const m = /^([│ ]*)(?:├── |└── )(.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    if (!m) continue;
    const depth = (m[1] as string).length / 4;
    const parent = stack[depth - 1] ?? "";
    // find-my-way prints a wildcard segment (`/a/*`) as a `*` child of `/a`, its slash left out.
    const label = m[2] as string;
    const path = parent + (label.startsWith("*") && !parent.endsWith("/") ? `/${label}` : label);
    stack[depth] = path;
    stack.length = depth + 1;
    for (const method of (m[3] ?? "").split(", ").filter((x) => x && x !== "HEAD")) {
      out.push(`${method} ${path}`);
    }
  }
  return out.sort();
}

/** A test double of the node service: the routes are all this test needs of the API. */
const routesOnly = {
  nodeId: "A",
  modelId: "m",
  maxContextTokens: 1,
  ready: () => ({ ok: true }),
  clusterView: () => ({}),
} as unknown as NodeService;

let api: FastifyInstance;
let peer: FastifyInstance;
beforeAll(async () => {
  api = buildApi({ service: routesOnly, metrics: createMetrics("A", { processMetrics: false }) });
  peer = buildPeerServer({
    auth: insecureAuth("A"),
    handlers: {
      hello: () => ({ id: "A", cluster: "c", model: "m", protocol: 2 }),
      isKnownPeer: () => false,
      onMessage: () => {},
      onForward: () => {},
    },
  });
  await Promise.all([api.ready(), peer.ready()]);
});
afterAll(() => Promise.all([api.close(), peer.close()]));

describe("docs/api.md", () => {
  test("lists every client API route, and only those", () => {
    const listed = routeRows(section(section(doc, "## Client API"), "### Routes")).sort();
    expect(listed.length).toBeGreaterThan(5);
    expect(listed).toEqual(routesOf(api));
  });

  test("lists every peer port route (and the channel's upgrade), and only those", () => {
    const listed = routeRows(section(section(doc, "## Peer protocol"), "### Routes")).sort();
    expect(listed).toEqual([...routesOf(peer), `GET ${CHANNEL_PATH}`].sort());
  });

  test("lists every error code the client API can send, with its statuses, and only those", () => {
    const table = section(section(doc, "## Client API"), "### Errors");
    const codes = section(table, "#### Error codes");
    const rows = [...codes.matchAll(/^\| `([a-z_]+)` \| ([0-9, ]+) \|/gm)].map((m) => ({
      code: m[1] as string,
      status: (m[2] as string).split(",").map((s) => Number(s.trim())),
    }));
    const expected = Object.entries(API_ERROR_CODES).map(([code, e]) => ({ code, status: [...e.status] }));
    const byCode = (a: { code: string }, b: { code: string }) => a.code.localeCompare(b.code);
    expect(rows.sort(byCode)).toEqual(expected.sort(byCode));
    // Each status of a code is explained in the status table too.
    const statuses = new Set([...table.matchAll(/^\| (\d{3}) \|/gm)].map((m) => Number(m[1])));
    for (const r of rows) for (const s of r.status) expect(statuses, `${r.code}: ${s}`).toContain(s);
  });

  test("lists no error code that nothing sends", () => {
    // The registry holds each code once; the places that send it name it again.
    const files: string[] = [];
    const walk = (dir: URL) => {
      for (const f of readdirSync(dir)) {
        const u = new URL(f, dir);
        if (statSync(u).isDirectory()) walk(new URL(`${f}/`, dir));
        else if (f.endsWith(".ts") && !u.pathname.endsWith("openai/error-codes.ts")) files.push(u.pathname);
      }
    };
    walk(new URL("src/", root));
    const source = files.map((f) => readFileSync(f, "utf8")).join("\n");
    for (const code of Object.keys(API_ERROR_CODES)) expect(source, code).toContain(`"${code}"`);
  });
});
