/**
 * fast-check generators of hostile peer-port requests for the boundary fuzz: no sender, a stranger,
 * a member's id taken at its word (insecure mode), odd signature headers (shared-secret mode), and
 * bodies that are arbitrary, mutated valid messages and forwards, or damaged snapshot frames.
 */
import fc from "fast-check";
import { encodeCancelFrame, encodeForwardFrame } from "../../src/net/forward-frame.js";
import type { ForwardMsg } from "../../src/net/transport-wire.js";
import { METHODS, oddPath } from "./fuzz-arbitraries.js";
import type { RawRequest } from "./fuzz-http.js";
import {
  damagedBytes,
  type Entries,
  mutation,
  objectText,
  oddJson,
  printable,
  validSnapshotBytes,
} from "./fuzz-values.js";

const json = (v: unknown) => JSON.stringify(v);

export const PEER_PATHS = [
  "/peer/hello",
  "/peer/message",
  "/peer/forward",
  "/peer/snapshot",
  "/peer/mesh",
  "/peer/channel",
];

const REQUEST_FIELDS = [
  "id",
  "tokens",
  "prompt",
  "maxTokens",
  "temperature",
  "topP",
  "seed",
  "stop",
  "cacheSalt",
  "adapter",
  "model",
  "tokenizer",
  "messages",
  "traceId",
];
const FORWARD_FIELDS = ["reqId", "attempt", "hops", "deadlineMs", "waitMs"];

/** Base64 the forward's tokens could be: sound, not base64, not whole tokens, or huge. */
const oddTokens = fc.oneof(
  fc.constantFrom("", "====", "abc", "AAAA", "AAAAAAA=", "!!!!", "AQAAAAIAAAA=", "////////"),
  fc.integer({ min: 1_000, max: 1_400_000 }).map((n) => "A".repeat(n - (n % 4))),
  oddJson,
);

/** A forward's body (JSON text, tokens as base64): sound (B asks A to serve "hello world" for 2 tokens), with 1–3 changes. */
const forwardBody: fc.Arbitrary<string> = fc
  .record({
    top: fc.array(mutation(FORWARD_FIELDS, false), { maxLength: 2 }),
    request: fc.array(
      fc.oneof(
        mutation(REQUEST_FIELDS, false),
        oddTokens.map(
          (t) =>
            (e: Entries): Entries => [...e.filter(([k]) => k !== "tokens"), ["tokens", json(t)]],
        ),
      ),
      { maxLength: 3 },
    ),
    reqId: fc.nat(1_000_000),
  })
  .map(({ top, request, reqId }) => {
    const id = json(`fz-${reqId}`);
    const req: Entries = [
      ["id", id],
      ["tokens", json(Buffer.from(Uint32Array.from([1, 2, 3, 4]).buffer).toString("base64"))],
      ["prompt", json("hello world")],
      ["maxTokens", "2"],
    ];
    const fwd: Entries = [
      ["reqId", id],
      ["attempt", "0"],
      ["hops", "1"],
    ];
    const changed = top.reduce((e, m) => m(e), fwd);
    return objectText([...changed, ["request", objectText(request.reduce((e, m) => m(e), req))]]);
  });

/** A lone message's body: a cancel, an error or a result for a request A never sent, changed. */
const messageBody: fc.Arbitrary<string> = fc
  .tuple(
    fc.constantFrom<Entries>(
      [
        ["type", json("cancel")],
        ["reqId", json("fz-1")],
        ["attempt", "0"],
      ],
      [
        ["type", json("error")],
        ["reqId", json("fz-1")],
        ["attempt", "0"],
        ["error", json("x")],
        ["retryable", "false"],
      ],
      [
        ["type", json("result")],
        ["reqId", json("fz-1")],
        ["attempt", "0"],
        [
          "result",
          json({
            text: "x",
            completionTokens: 1,
            promptTokens: 1,
            cachedTokens: 0,
            prefillMs: 1,
            decodeMs: 1,
            finishReason: "stop",
          }),
        ],
        ["timing", json({ servedBy: "B", queueMs: 0, prefillMs: 1, decodeMs: 1 })],
      ],
    ),
    fc.array(
      mutation(
        ["type", "reqId", "attempt", "error", "retryable", "result", "timing", "final", "queueDepth"],
        false,
      ),
      { maxLength: 3 },
    ),
  )
  // A goodbye would make A drop B as a member: the rest of the run would test only the 403.
  .map(([base, changes]) =>
    objectText(
      changes.reduce((e, m) => m(e), base).filter(([k, v]) => !(k === "type" && v === json("goodbye"))),
    ),
  );

/** A body for a peer path: one meant for it (changed), arbitrary JSON, or bytes. */
function peerBody(path: string): fc.Arbitrary<Buffer> {
  const anyJson = fc.oneof(fc.jsonValue({ maxDepth: 3 }).map(json), oddJson).map((t) => Buffer.from(t));
  const bytes = fc.uint8Array({ maxLength: 256 }).map((b) => Buffer.from(b));
  if (path.startsWith("/peer/forward"))
    return fc.oneof({ arbitrary: forwardBody.map((t) => Buffer.from(t)), weight: 4 }, anyJson, bytes);
  if (path.startsWith("/peer/message"))
    return fc.oneof({ arbitrary: messageBody.map((t) => Buffer.from(t)), weight: 4 }, anyJson, bytes);
  if (path.startsWith("/peer/snapshot"))
    return fc.oneof({ arbitrary: damagedBytes(validSnapshotBytes("B")), weight: 4 }, anyJson, bytes);
  return fc.oneof(anyJson, bytes);
}

/** Who a request says it is from: nobody, a member, the node itself, a stranger, or nonsense. */
const senders = (member: string, self: string) =>
  fc.oneof(
    { arbitrary: fc.constant(member), weight: 6 },
    { arbitrary: fc.constantFrom(undefined, self, "Z", "", "b c", "x".repeat(300)), weight: 2 },
    { arbitrary: printable, weight: 1 },
  );

/** The headers beside a snapshot (and signature headers), at odd values. */
const oddPeerHeaders = fc.record(
  {
    "x-prefixmesh-holds": fc.oneof(fc.constantFrom("1:1", "99999999999999999:1", "-1:0", ":"), printable),
    "x-prefixmesh-blocks": fc.oneof(fc.constantFrom("1", "1e9", "-1", "999999999999999999"), printable),
    "x-prefixmesh-at": fc.oneof(fc.constantFrom("1.5", "NaN", "1e400"), printable),
    "x-prefixmesh-echo": fc.oneof(fc.constantFrom("1:2", "1:2:3", "a:b"), printable),
    "x-prefixmesh-served": printable,
    "x-prefixmesh-timestamp": fc.oneof(fc.constantFrom("0", "-1", "99999999999999999999", "1e3"), printable),
    "x-prefixmesh-nonce": fc.oneof(fc.constantFrom("00", "zz", "a".repeat(64)), printable),
    "x-prefixmesh-signature": fc.oneof(fc.constantFrom("", "00".repeat(32), "v1=abc"), printable),
    "x-prefixmesh-destination": fc.constantFrom("A", "C", "*", ""),
    "x-prefixmesh-challenge": fc.oneof(fc.constantFrom("0".repeat(32), "f".repeat(128), "xyz"), printable),
  },
  { requiredKeys: [] },
);

/** A request to the peer port: mostly POSTs of bodies meant for their path, some odd routes. */
export function peerRequest(member: string, self: string): fc.Arbitrary<RawRequest> {
  const post = fc
    .oneof(
      { arbitrary: fc.constant("/peer/forward"), weight: 4 },
      { arbitrary: fc.constantFrom("/peer/message", "/peer/snapshot"), weight: 3 },
      { arbitrary: fc.constantFrom(...PEER_PATHS), weight: 2 },
    )
    .chain((path) =>
      fc.record({
        method: fc.constant("POST"),
        path: fc.oneof(
          { arbitrary: fc.constant(path), weight: 5 },
          fc.constantFrom(`${path}?x=1`, `${path}/`),
        ),
        body: peerBody(path),
        contentType: fc.constantFrom("application/json", "application/octet-stream", "text/plain", undefined),
      }),
    );
  const odd = fc.record({
    method: fc.constantFrom(...METHODS),
    path: oddPath(PEER_PATHS),
    body: fc.option(
      fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
      { nil: undefined },
    ),
    contentType: fc.constant(undefined),
  });
  return fc
    .record({
      r: fc.oneof({ arbitrary: post, weight: 4 }, { arbitrary: odd, weight: 1 }),
      sender: senders(member, self),
      extra: oddPeerHeaders,
    })
    .map(({ r, sender, extra }) => {
      const headers: Record<string, string> = { ...extra };
      if (sender !== undefined) headers["x-prefixmesh-sender"] = sender;
      if (r.contentType !== undefined) headers["content-type"] = r.contentType;
      const noBody = r.body === undefined || r.method === "GET" || r.method === "HEAD";
      return noBody
        ? { method: r.method, path: r.path, headers }
        : { method: r.method, path: r.path, headers, body: r.body };
    });
}

/** A forward B could send on its channel, for stream `k`. */
function channelForward(k: number, maxTokens: number): Buffer {
  const msg: ForwardMsg = {
    type: "forward",
    reqId: `ch-${k}`,
    attempt: 0,
    hops: 1,
    request: { id: `ch-${k}`, tokens: Uint32Array.from([1, 2, 3, 4]), prompt: "hello world", maxTokens },
  };
  return encodeForwardFrame(k, msg);
}

/** A channel frame's layout around any header text and token bytes: [u32 BE n][n bytes][tokens]. */
function frameOf(head: string, tokenBytes: number, lie = 0): Buffer {
  const h = Buffer.from(head);
  const out = Buffer.alloc(4 + h.length + tokenBytes, 1);
  out.writeUInt32BE(Math.max(0, h.length + lie) >>> 0, 0);
  h.copy(out, 4);
  return out;
}

/**
 * Frames for the forward channel (a WebSocket on the peer port): sound forwards and cancels, forwards
 * with changed fields or damaged bytes, headers that lie about their length, random bytes.
 */
export const channelFrame: fc.Arbitrary<Buffer> = fc.oneof(
  {
    arbitrary: fc
      .tuple(fc.nat(1_000), fc.constantFrom(1, 2, 1_000_000))
      .map(([k, max]) => channelForward(k, max)),
    weight: 3,
  },
  {
    arbitrary: fc.tuple(fc.nat(1_000), fc.boolean()).map(([k, fin]) => encodeCancelFrame(k, fin)),
    weight: 1,
  },
  {
    arbitrary: fc
      .tuple(
        fc.oneof(fc.nat(1_000).map(String), oddJson),
        forwardBody,
        fc.oneof(fc.constantFrom(0, 16), fc.nat(40)),
      )
      .map(([k, f, tokenBytes]) => frameOf(`{"t":"fwd","k":${k},"f":${f}}`, tokenBytes)),
    weight: 3,
  },
  { arbitrary: fc.nat(1_000).chain((k) => damagedBytes(channelForward(k, 2))), weight: 2 },
  {
    arbitrary: fc
      .tuple(
        fc.oneof(fc.jsonValue({ maxDepth: 2 }).map(json), oddJson),
        fc.nat(12),
        fc.integer({ min: -8, max: 1 << 20 }),
      )
      .map(([head, tokenBytes, lie]) => frameOf(head, tokenBytes, lie)),
    weight: 1,
  },
  { arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)), weight: 1 },
);
