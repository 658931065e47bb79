/**
 * fast-check generators of hostile client requests for the boundary fuzz (boundary-fuzz.test.ts):
 * mutations of valid requests with damaged bodies and odd content types and headers, odd methods,
 * paths and query strings, and malformed HTTP as raw bytes.
 */
import fc from "fast-check";
import type { RawRequest } from "./fuzz-http.js";
import { type Entries, mutation, objectText, oddJson, printable } from "./fuzz-values.js";

const json = (v: unknown) => JSON.stringify(v);

/** How a body's text becomes bytes: intact, cut short, with invalid UTF-8, wrapped, or emptied. */
const bodyDamage: fc.Arbitrary<(text: string) => Buffer> = fc.oneof(
  { arbitrary: fc.constant((t: string) => Buffer.from(t)), weight: 6 },
  {
    arbitrary: fc
      .double({ min: 0, max: 1, noNaN: true })
      .map((f) => (t: string) => Buffer.from(t.slice(0, Math.floor(t.length * f)))),
    weight: 1,
  },
  {
    arbitrary: fc
      .constantFrom(
        [0xff],
        [0xc3, 0x28],
        [0xed, 0xa0, 0x80],
        [0xf8, 0x88, 0x80, 0x80, 0x80],
        [0x80],
        [0xe2, 0x82],
      )
      .map((bad) => (t: string) => {
        // Inside the first string value when there is one (a prompt or content), else at the end.
        const b = Buffer.from(t);
        const at = b.indexOf("hello");
        const i = at < 0 ? b.length : at + 2;
        return Buffer.concat([b.subarray(0, i), Buffer.from(bad), b.subarray(i)]);
      }),
    weight: 2,
  },
  {
    arbitrary: fc.constantFrom(
      (t: string) => Buffer.from(`[${t}]`),
      (t: string) => Buffer.from(json(t)),
    ),
    weight: 1,
  },
  { arbitrary: fc.constant(() => Buffer.alloc(0)), weight: 1 },
);

export const CONTENT_TYPES = [
  "application/json",
  "application/json; charset=utf-8",
  "application/json; charset=latin1",
  "application/json; charset=utf-16",
  "APPLICATION/JSON",
  "application/json, text/plain",
  "application/vnd.api+json",
  "text/plain",
  "text/event-stream",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/octet-stream",
  "*/*",
  "",
];

/** Headers a client may add: odd deadlines, request ids, accepts; printable ASCII only (as HTTP allows). */
export const oddHeaders: fc.Arbitrary<Record<string, string>> = fc.oneof(
  // Mostly none or sound ones: an odd header is refused before the body is read at all.
  { arbitrary: fc.constant({}), weight: 2 },
  {
    arbitrary: fc.record(
      {
        "x-prefixmesh-deadline-ms": fc.constantFrom("1000", "3600000", "15000"),
        "x-request-id": fc.constantFrom("ok-id", "a.b~c:d@e+f=g/h-i", "x".repeat(128)),
        accept: fc.constantFrom("text/event-stream", "application/json", "*/*", "text/html", ""),
        authorization: fc.constantFrom("Bearer x", "Basic !!", ""),
      },
      { requiredKeys: [] },
    ),
    weight: 2,
  },
  {
    arbitrary: fc.record(
      {
        "x-prefixmesh-deadline-ms": fc.oneof(
          fc.constantFrom("0", "-1", "1", "99999999", "1e3", "NaN", " 5 ", ""),
          printable,
        ),
        "x-request-id": fc.oneof(fc.constantFrom("", "a b", "x".repeat(129), "../../etc"), printable),
      },
      { requiredKeys: [] },
    ),
    weight: 1,
  },
);

export interface ApiTarget {
  path: string;
  /** A valid body's fields, as [key, JSON text]. */
  valid: Entries;
  fields: readonly string[];
  chat: boolean;
}

/** POST requests to a client endpoint: arbitrary JSON, or a valid body mutated, then maybe damaged. */
export function apiPost(targets: readonly ApiTarget[]): fc.Arbitrary<RawRequest> {
  const mutated = fc.constantFrom(...targets).chain((t) =>
    fc
      .record({
        stream: fc.constantFrom("true", "false"),
        changes: fc.array(mutation(t.fields, t.chat), { minLength: 1, maxLength: 3 }),
      })
      .map(({ stream, changes }) => {
        const base: Entries = [...t.valid, ["stream", stream]];
        return { path: t.path, text: objectText(changes.reduce((e, m) => m(e), base)) };
      }),
  );
  const arbitrary = fc.record({
    path: fc.constantFrom(...targets.map((t) => t.path)),
    text: fc.oneof(fc.jsonValue({ maxDepth: 4 }).map(json), oddJson),
  });
  return fc
    .record({
      body: fc.oneof({ arbitrary: mutated, weight: 3 }, { arbitrary, weight: 1 }),
      damage: bodyDamage,
      contentType: fc.oneof(
        { arbitrary: fc.constant("application/json"), weight: 4 },
        { arbitrary: fc.option(fc.constantFrom(...CONTENT_TYPES), { nil: undefined }), weight: 1 },
      ),
      headers: oddHeaders,
    })
    .map(({ body, damage, contentType, headers }) => ({
      method: "POST",
      path: body.path,
      headers: { ...headers, ...(contentType === undefined ? {} : { "content-type": contentType }) },
      body: damage(body.text),
    }));
}

/** Methods Node's parser knows (others are refused before any route: see MALFORMED_HTTP). */
export const METHODS = [
  "GET",
  "POST",
  "PUT",
  "DELETE",
  "PATCH",
  "HEAD",
  "OPTIONS",
  "TRACE",
  "PROPFIND",
  "MKCOL",
  "SEARCH",
  "PURGE",
  "LOCK",
];

/** Paths near the known ones: odd suffixes, encodings, traversal, long; then an odd query string. */
export function oddPath(known: readonly string[]): fc.Arbitrary<string> {
  const suffix = fc.oneof(
    fc.constantFrom(
      "",
      "",
      "/",
      "//",
      "/..",
      "/%2e%2e",
      "%00",
      "%zz",
      "%",
      "%c0%ae",
      ";x",
      "/%2F",
      "/x/y",
      "/%F0%9F%98%80",
      "/%ff",
    ),
    fc.string({ maxLength: 30 }).map((s) => `/${encodeURIComponent(s)}`),
    fc.integer({ min: 100, max: 6_000 }).map((n) => "/a".repeat(n)),
  );
  const query = fc.oneof(
    fc.constantFrom(
      "",
      "",
      "?",
      "?a",
      "?a=1&a=2",
      "?%",
      "?x=%zz",
      "?__proto__[x]=1",
      "?stream=true",
      "?#frag",
      "?model=%00",
    ),
    fc.string({ maxLength: 40 }).map((s) => `?q=${encodeURIComponent(s)}`),
    fc.integer({ min: 100, max: 6_000 }).map((n) => `?${"k=v&".repeat(n)}`),
  );
  return fc.tuple(fc.constantFrom(...known), suffix, query).map(([p, s, q]) => p + s + q);
}

/** Any method on a path near a known one, with no body or a small one. */
export function oddRoute(
  known: readonly string[],
  extraHeaders: fc.Arbitrary<Record<string, string>>,
): fc.Arbitrary<RawRequest> {
  return fc
    .record({
      method: fc.constantFrom(...METHODS),
      path: oddPath(known),
      headers: extraHeaders,
      body: fc.option(fc.oneof(fc.jsonValue({ maxDepth: 2 }).map(json), fc.constant("not json")), {
        nil: undefined,
      }),
    })
    .map(({ method, path, headers, body }) =>
      body === undefined || method === "GET" || method === "HEAD"
        ? { method, path, headers }
        : { method, path, headers: { ...headers, "content-type": "application/json" }, body },
    );
}

/** Whole requests Node's HTTP parser refuses, or that end before they are complete. */
export const MALFORMED_HTTP: readonly string[] = [
  "FOO / HTTP/1.1\r\nHost: x\r\n\r\n",
  "GET  HTTP/1.1\r\nHost: x\r\n\r\n",
  "GET /\u0000 HTTP/1.1\r\nHost: x\r\n\r\n",
  "GET / HTTP/9.9\r\nHost: x\r\n\r\n",
  "GET / HTTP/1.1\r\nno colon here\r\n\r\n",
  "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
  "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
  "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
  "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
  'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":',
  "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
  "GET /health HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0001b\r\n\r\n",
  `GET /health HTTP/1.1\r\nHost: x\r\nX-Long: ${"a".repeat(20_000)}\r\n\r\n`,
  "CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n",
  "GET /peer/channel HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
  "GET /health HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
  "HTTP/1.1 200 OK\r\n\r\n",
  "GET /health HTTP/1.1\r\n\r\n",
  `GET /${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
];
