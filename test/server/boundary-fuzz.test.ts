/**
 * Property-based fuzz of a running node's boundary: hostile client requests (bodies, methods, paths,
 * headers, malformed HTTP) on the API and admin endpoints, and unauthenticated or malformed requests
 * on the peer port (insecure and shared-secret). Every answer must be a 2xx, a 4xx with a JSON error
 * message, or a 503/429 with Retry-After; it must come in full within a generous deadline; afterwards
 * the node is healthy and still serves. A member's forward channel answers every frame its decoder
 * accepts or refuses, and closes on one it cannot read. Seeds are pinned: a failure names its
 * counterexample and reproduces.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  HEADER_DESTINATION,
  HEADER_NONCE,
  HEADER_SENDER,
  HEADER_SIGNATURE,
  HEADER_TIMESTAMP,
} from "../../src/net/auth/hmac.js";
import { loadSecretFile, writeSecretFile } from "../../src/net/auth/secret.js";
import { hmacAuth } from "../../src/net/transport-auth.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { modelOf, postCompletion } from "../api-client.js";
import { type ApiTarget, apiPost, MALFORMED_HTTP, oddHeaders, oddRoute } from "./fuzz-arbitraries.js";
import { channelSession } from "./fuzz-channel.js";
import {
  breach,
  errorMessage,
  type RawAnswer,
  type RawRequest,
  send,
  sendBytes,
  shortPrint,
} from "./fuzz-http.js";
import { channelFrame, PEER_PATHS, peerRequest } from "./fuzz-peer-arbitraries.js";
import { CHAT_FIELDS, COMPLETION_FIELDS } from "./fuzz-values.js";
import { pair, soloNode } from "./helpers.js";

/** Requests of `arb`, printed short in a counterexample. */
const printedShort = (arb: fc.Arbitrary<RawRequest>) =>
  arb.map((r) => Object.assign(r, { [fc.toStringMethod]: () => shortPrint(r) }));

/** Channel frames, printed short (base64, cut) in a counterexample. */
const printedShortFrames = (arb: fc.Arbitrary<Buffer[]>) =>
  arb.map((frames) =>
    Object.assign(frames, {
      [fc.toStringMethod]: () =>
        frames.map((f) => `${f.toString("base64").slice(0, 200)} (${f.length} bytes)`).join(", "),
    }),
  );

/**
 * Seeds are pinned and runs modest, so a failure reproduces and the file stays fast. A longer hunt:
 * PREFIXMESH_FUZZ_SEED=n shifts every seed, PREFIXMESH_FUZZ_RUNS=k multiplies every run count, and
 * PREFIXMESH_FUZZ_STATS=1 prints how often each status came back.
 */
const SEED_SHIFT = Number(process.env.PREFIXMESH_FUZZ_SEED ?? 0);
const RUNS_SCALE = Number(process.env.PREFIXMESH_FUZZ_RUNS ?? 1);
const params = (seed: number, numRuns: number) => ({
  seed: seed + SEED_SHIFT,
  numRuns: numRuns * RUNS_SCALE,
  endOnFailure: true,
});
const statusCounts = new Map<string, number>();

/**
 * Why a 2xx answer lost what it owed, or undefined: a stream must end with its `[DONE]` (client) or
 * its final record (peer forward); a completion must carry its choices.
 */
function unfinished(r: RawRequest, a: RawAnswer): string | undefined {
  if (a.status !== 200) return undefined;
  const text = a.body.toString("utf8");
  const path = r.path.split("?")[0];
  if (path === "/peer/forward") {
    const last = text.trimEnd().split("\n").at(-1) ?? "";
    return last.includes('"t":"msg"')
      ? undefined
      : `forward stream without its final record: ${text.slice(-300)}`;
  }
  if (path !== "/v1/completions" && path !== "/v1/chat/completions") return undefined;
  if (String(a.headers["content-type"]).startsWith("text/event-stream")) {
    return text.endsWith("data: [DONE]\n\n") ? undefined : `stream without [DONE]: ${text.slice(-300)}`;
  }
  const body = JSON.parse(text) as { choices?: unknown[] };
  return Array.isArray(body.choices) && body.choices.length === 1
    ? undefined
    : `no choice: ${text.slice(0, 300)}`;
}

/** No answer to these requests is anywhere near this long (every size a caller controls is bounded). */
const MAX_ANSWER_BYTES = 1024 * 1024;

/** The headers a shared-secret signature sets (the fuzz's own values for them are dropped when signing). */
const SIGNATURE_HEADERS = new Set([
  HEADER_SENDER,
  HEADER_DESTINATION,
  HEADER_SIGNATURE,
  HEADER_NONCE,
  HEADER_TIMESTAMP,
]);

/** Generous: a busy two-core machine, a long prompt tokenized, a short answer decoded. */
const DEADLINE_MS = 15_000;
const API_PATHS = [
  "/",
  "/health",
  "/ready",
  "/metrics",
  "/cluster",
  "/dashboard",
  "/v1",
  "/v1/models",
  "/v1/models/",
  "/v1/completions",
  "/v1/chat/completions",
  "/tokenize",
  "/admin/policy",
  "/admin/reset-cache",
];

/** The client endpoints the fuzz posts to, each with a valid body to start from. */
function apiTargets(model: string): ApiTarget[] {
  const m = JSON.stringify(model);
  return [
    {
      path: "/v1/completions",
      valid: [
        ["model", m],
        ["prompt", JSON.stringify("hello world")],
        ["max_tokens", "4"],
      ],
      fields: COMPLETION_FIELDS,
      chat: false,
    },
    {
      path: "/v1/chat/completions",
      valid: [
        ["model", m],
        ["messages", JSON.stringify([{ role: "user", content: "hello world" }])],
        ["max_tokens", "4"],
      ],
      fields: CHAT_FIELDS,
      chat: true,
    },
    {
      path: "/tokenize",
      valid: [["prompt", JSON.stringify("hello")]],
      fields: ["model", "prompt", "content"],
      chat: false,
    },
    {
      path: "/admin/policy",
      valid: [["policy", JSON.stringify("affinity")]],
      fields: ["policy"],
      chat: false,
    },
    { path: "/admin/reset-cache", valid: [], fields: ["scope"], chat: false },
  ];
}

describe("boundary fuzz: a running node answers hostile requests with clear errors", () => {
  const dir = mkdtempSync(join(tmpdir(), "prefixmesh-fuzz-"));
  let a: NodeHandle;
  let b: NodeHandle;
  let secret: NodeHandle;
  /** A node with little room (few connections, one run at a time, a short wait bound) for bursts. */
  let tight: NodeHandle;
  let model: string;

  beforeAll(async () => {
    [a, b] = await pair({ simTimeScale: "0.001" });
    model = await modelOf(a.apiUrl);
    const secretFile = join(dir, "secret");
    await writeSecretFile(secretFile);
    ({ node: secret } = await soloNode(undefined, { insecure: false, secretFile }));
    ({ node: tight } = await soloNode(undefined, {
      maxConnections: 24,
      maxConnectionsPerAddress: 16,
      concurrency: 1,
      maxWaitMs: 2,
      // Fast enough that a burst of the longest valid prompts finishes well within the deadline.
      simTimeScale: 0.02,
    }));
  });
  afterAll(async () => {
    if (process.env.PREFIXMESH_FUZZ_STATS) console.log([...statusCounts].sort().join("\n"));
    await Promise.all([a, b, secret, tight].filter((n) => n !== undefined).map((n) => n.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  /** Sends `r` and fails the property with the rule it broke; returns the answer. */
  async function check(base: string, r: RawRequest): Promise<RawAnswer> {
    const answer = await send(base, r, DEADLINE_MS);
    const shape = base === a.peerUrl || base === secret.peerUrl ? "peer" : "openai";
    const why =
      breach(r, answer, shape) ??
      unfinished(r, answer) ??
      (answer.body.length > MAX_ANSWER_BYTES ? `an answer of ${answer.body.length} bytes` : undefined);
    if (why) throw new Error(why);
    const port =
      base === a.peerUrl ? "peer" : base === a.apiUrl ? "api" : base === tight.apiUrl ? "tight" : "secret";
    const detail =
      process.env.PREFIXMESH_FUZZ_STATS === "2" ? (errorMessage(answer.body) ?? "").slice(0, 50) : "";
    const key = `${port} ${answer.status} ${detail}`;
    statusCounts.set(key, (statusCounts.get(key) ?? 0) + 1);
    return answer;
  }

  /** The node is healthy and serves a valid request, as before the fuzz. */
  async function stillServes(node: NodeHandle): Promise<void> {
    const health = await fetch(`${node.apiUrl}/health`);
    expect(health.status).toBe(200);
    expect(((await health.json()) as { status: string }).status).toBe("ok");
    const res = await postCompletion(node.apiUrl, { model, prompt: "still here", max_tokens: 2 });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { text: string }[] };
    expect(typeof body.choices[0]?.text).toBe("string");
  }

  it("client endpoints: arbitrary JSON and mutated valid requests, streamed or not", async () => {
    await fc.assert(
      fc.asyncProperty(printedShort(apiPost(apiTargets(model))), async (r) => {
        await check(a.apiUrl, r);
      }),
      params(20261205, 500),
    );
    await stillServes(a);
  });

  it("bursts of concurrent requests past the node's bounds: refusals say when to retry", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(printedShort(apiPost(apiTargets(model))), { minLength: 10, maxLength: 40 }),
        async (rs) => {
          await Promise.all(rs.map((r) => check(tight.apiUrl, r)));
        },
      ),
      params(20261210, 15),
    );
    await stillServes(tight);
  });

  it("client and admin routes: odd methods, paths and query strings", async () => {
    await fc.assert(
      fc.asyncProperty(printedShort(oddRoute(API_PATHS, oddHeaders)), async (r) => {
        await check(a.apiUrl, r);
      }),
      params(20261206, 300),
    );
    await stillServes(a);
  });

  it("malformed HTTP on either port gets an error answer in its shape and a closed connection", async () => {
    const breaches: string[] = [];
    // Each as sent, and as a HEAD (whose answer must have no body, however early the request failed).
    const texts = MALFORMED_HTTP.flatMap((t) => [t, t.replace(/^[A-Z]+ /, "HEAD ")]);
    for (const [base, shape] of [
      [a.apiUrl, "openai"],
      [a.peerUrl, "peer"],
      [secret.peerUrl, "peer"],
    ] as const) {
      for (const text of new Set(texts)) {
        const answer = await sendBytes(base, Buffer.from(text, "latin1"), DEADLINE_MS, true);
        const why = breach(
          { method: text.split(" ")[0] ?? "", path: JSON.stringify(text.slice(0, 60)) },
          answer,
          shape,
        );
        if (why) breaches.push(`${base}: ${why}`);
      }
    }
    expect(breaches).toEqual([]);
    await stillServes(a);
  });

  it("peer port, insecure: strangers, members' ids taken at their word, malformed bodies", async () => {
    await fc.assert(
      fc.asyncProperty(printedShort(peerRequest("B", "A")), async (r) => {
        await check(a.peerUrl, r);
      }),
      params(20261207, 500),
    );
    await stillServes(a);
    // B is still A's member: the fuzz's requests in its name did not make A drop it.
    expect(a.runtime.admin.hasPeer("B")).toBe(true);
  });

  it("peer port, insecure: a member's forward channel answers each frame or closes on a bad one", async () => {
    await fc.assert(
      fc.asyncProperty(
        printedShortFrames(fc.array(channelFrame, { minLength: 1, maxLength: 5 })),
        async (frames) => {
          await channelSession(a.peerUrl, frames, DEADLINE_MS, MAX_ANSWER_BYTES);
        },
      ),
      params(20261209, 120),
    );
    await stillServes(a);
    expect(a.runtime.admin.hasPeer("B")).toBe(true);
  });

  it("peer port, shared secret: unsigned, badly signed and signed malformed requests", async () => {
    // Signed as B (a stranger to this node, which has no members) with the cluster's secret: past
    // the signature check, so the hello and mesh handlers see the malformed bodies.
    const auth = hmacAuth("B", await loadSecretFile(join(dir, "secret")));
    const signed = (r: RawRequest): RawRequest => {
      // Values with edge whitespace arrive trimmed, so they cannot be signed as sent: trimmed here.
      const own = Object.entries(r.headers ?? {})
        .filter(([k]) => !SIGNATURE_HEADERS.has(k))
        .map(([k, v]) => [k, v.trim()] as const);
      const body = r.body === undefined ? undefined : Buffer.from(r.body);
      const headers = auth.sign({
        method: r.method,
        path: r.path,
        body,
        to: "A",
        headers: Object.fromEntries(own),
      });
      return { ...r, headers };
    };
    await fc.assert(
      fc.asyncProperty(printedShort(peerRequest("B", "A")), fc.boolean(), async (r, sign) => {
        const answer = await check(secret.peerUrl, sign ? signed(r) : r);
        // Nothing unsigned gets past the gate: a refusal, or a route that does not exist at all.
        const known = PEER_PATHS.some((p) => r.path.split("?")[0] === p);
        if (!sign && known && answer.status < 400)
          throw new Error(`unsigned ${r.method} ${r.path} accepted: ${answer.status}`);
        // A signed request no route takes learns so (404, or 405 for a known path), whatever its
        // method and body: its signature is checked over the body it sent, not refused unread (nor
        // asked for a membership no route grants).
        if (sign && !known && (answer.status === 401 || answer.status === 403))
          throw new Error(`signed ${r.method} ${r.path} to no route answered ${answer.status}`);
        if (sign && known && answer.status === 401)
          throw new Error(`signed ${r.method} ${r.path} refused as unsigned: ${answer.body}`);
      }),
      params(20261208, 300),
    );
    await stillServes(secret);
  });
});
