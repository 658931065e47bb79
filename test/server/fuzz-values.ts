/**
 * fast-check generators of the values the boundary fuzz puts in requests (boundary-fuzz.test.ts):
 * JSON built as text (so it can hold what JSON.stringify never writes: duplicate keys, `__proto__`,
 * nesting deeper than a stack), odd values and sound ones for each field, changes to a request's
 * fields, and damaged bytes.
 */
import fc from "fast-check";
import { encodeSnapshot } from "../../src/core/snapshot-codec.js";

const json = (v: unknown) => JSON.stringify(v);

/** JSON text of a value no field should trust: wrong types, extreme or number-like strings, huge. */
export const oddJson: fc.Arbitrary<string> = fc.oneof(
  {
    arbitrary: fc
      .constantFrom(
        "1e309",
        "-1",
        "NaN",
        "Infinity",
        "-Infinity",
        "0x10",
        "1e-400",
        "9007199254740993",
        "-0",
        "",
        " ",
        "\u0000",
        "null",
        "true",
        "[]",
        "\ud800",
        "😀",
      )
      .map(json),
    weight: 4,
  },
  {
    // Number literals JSON allows but no field expects (1e400 parses to Infinity).
    arbitrary: fc.constantFrom(
      "1e400",
      "-1e400",
      "1e308",
      "-1e308",
      "9007199254740993",
      "-1",
      "0",
      "-0",
      "0.5",
      "1.5",
      "2147483648",
      "4294967296",
      "1e-300",
      "-2.5",
      "3",
      "1000000",
      "1000001",
    ),
    weight: 4,
  },
  { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }).map(json), weight: 2 },
  { arbitrary: fc.integer().map(json), weight: 1 },
  { arbitrary: fc.constantFrom("true", "false", "null", "{}", "[]", '[""]', "[null]", '{"":1}'), weight: 3 },
  { arbitrary: fc.string({ maxLength: 40 }).map(json), weight: 2 },
  { arbitrary: fc.jsonValue({ maxDepth: 3 }).map(json), weight: 3 },
  {
    // Long strings within the body limit (the node's default is 4 MiB).
    arbitrary: fc
      .tuple(fc.integer({ min: 1_000, max: 400_000 }), fc.constantFrom("a", "é", "😀", " ", "\n", "lorem "))
      .map(([n, c]) => json(c.repeat(Math.ceil(n / c.length)))),
    weight: 1,
  },
  {
    // Nesting deeper than any recursive walk survives.
    arbitrary: fc.integer({ min: 10, max: 50_000 }).map((d) => "[".repeat(d) + "]".repeat(d)),
    weight: 1,
  },
);

/** An object's JSON text from [key, value-JSON] entries, duplicates and all. */
export function objectText(entries: readonly (readonly [string, string])[]): string {
  return `{${entries.map(([k, v]) => `${json(k)}:${v}`).join(",")}}`;
}

const ROLES = ["system", "user", "assistant", "tool", "developer"];

/** A chat message as JSON text: sound, or with an odd role, content, part or extra field. */
const oddMessage: fc.Arbitrary<string> = fc
  .record({
    role: fc.oneof(
      fc.constantFrom(...ROLES).map(json),
      fc.constantFrom("function", "USER", "", "root", "__proto__").map(json),
      oddJson,
    ),
    content: fc.oneof(
      fc.constant(json("hi")),
      fc.constant("null"),
      oddJson,
      fc
        .array(
          fc.oneof(
            fc.constant(json({ type: "text", text: "hi" })),
            fc.constant(json({ type: "image_url", image_url: { url: "http://127.0.0.1/x.png" } })),
            fc.record({ type: oddJson, text: oddJson }).map((p) => objectText(Object.entries(p))),
            oddJson,
          ),
          { maxLength: 300 },
        )
        .map((parts) => `[${parts.join(",")}]`),
    ),
    extra: fc.option(fc.tuple(fc.constantFrom("name", "tool_calls", "tool_call_id", "x"), oddJson)),
  })
  .map(({ role, content, extra }) =>
    objectText([["role", role], ["content", content], ...(extra ? [extra] : [])]),
  );

const oddMessages: fc.Arbitrary<string> = fc.oneof(
  fc.array(oddMessage, { maxLength: 8 }).map((m) => `[${m.join(",")}]`),
  // More messages than the bound (4096).
  fc.integer({ min: 4000, max: 5000 }).map(
    (n) =>
      `[${Array(n)
        .fill(json({ role: "user", content: "x" }))
        .join(",")}]`,
  ),
);

export const COMPLETION_FIELDS = [
  "model",
  "prompt",
  "max_tokens",
  "temperature",
  "top_p",
  "seed",
  "presence_penalty",
  "frequency_penalty",
  "logit_bias",
  "stop",
  "stream",
  "stream_options",
  "n",
  "user",
  "cache_salt",
  "echo",
  "logprobs",
  "suffix",
  "best_of",
];
export const CHAT_FIELDS = [
  ...COMPLETION_FIELDS.filter((f) => !["prompt", "echo", "suffix", "best_of"].includes(f)),
  "messages",
  "max_completion_tokens",
  "tools",
  "functions",
  "response_format",
];

export type Entries = [string, string][];
type Mutation = (e: Entries) => Entries;

/** One change to a request's fields: a field set to an odd value, dropped, duplicated, or a stranger. */
export function mutation(fields: readonly string[], chat: boolean): fc.Arbitrary<Mutation> {
  const set = fc.tuple(fc.constantFrom(...fields), chat ? fc.oneof(oddJson, oddMessages) : oddJson).map(
    ([k, v]): Mutation =>
      (e) => [...e.filter(([f]) => f !== k), [k, v]],
  );
  const drop = fc.constantFrom(...fields).map(
    (k): Mutation =>
      (e) =>
        e.filter(([f]) => f !== k),
  );
  const duplicate = fc.tuple(fc.constantFrom(...fields), oddJson).map(
    ([k, v]): Mutation =>
      (e) => [...e, [k, v]],
  );
  const stranger = fc
    .tuple(
      fc.oneof(fc.constantFrom("__proto__", "constructor", "prototype", "", "x".repeat(10_000)), fc.string()),
      oddJson,
    )
    .map(
      ([k, v]): Mutation =>
        (e) => [...e, [k, v]],
    );
  const messages = oddMessages.map(
    (m): Mutation =>
      (e) => [...e.filter(([f]) => f !== "messages"), ["messages", m]],
  );
  const known = fields.filter((f) => SOUND[f] !== undefined);
  const sound = fc
    .constantFrom(...(known.length > 0 ? known : fields))
    .chain((k) => fc.constantFrom(...(SOUND[k] ?? ["null"])).map((v) => [k, v] as const))
    .map(
      ([k, v]): Mutation =>
        (e) => [...e.filter(([f]) => f !== k), [k, v]],
    );
  const odd = chat
    ? fc.oneof(set, drop, duplicate, stranger, messages)
    : fc.oneof(set, drop, duplicate, stranger);
  // As often a sound value as an odd change: requests the node serves, streamed or not, in every shape.
  return fc.oneof(sound, odd);
}

/** Values each field may soundly hold (JSON text), besides the valid request's own. */
const SOUND: Record<string, readonly string[]> = {
  max_tokens: ["1", "4", "null"],
  max_completion_tokens: ["1", "3", "null"],
  temperature: ["0", "-0", "0.7", "2", "null"],
  top_p: ["1", "0.5", "1e-9"],
  seed: ["0", "-5", "123456789", "9007199254740991"],
  presence_penalty: ["-2", "0", "1.5"],
  frequency_penalty: ["0", "2"],
  logit_bias: ["{}", "null"],
  stop: [json("\n"), json(["a", "b"]), "[]", json(""), "null"],
  stream: ["true", "false", "null"],
  stream_options: [json({ include_usage: true }), "{}", "null"],
  n: ["1", "null"],
  user: [json("u"), json("")],
  cache_salt: [json("tenant-1"), json("😀"), "null"],
  echo: ["false", "null"],
  logprobs: ["null"],
  suffix: ["null"],
  best_of: ["1", "null"],
  prompt: [
    json("x"),
    json(["one prompt"]),
    json("😀 é \u0000 \ud800"),
    json("word ".repeat(2_000)),
    json(" "),
  ],
  messages: [
    json([
      { role: "system", content: "be brief" },
      { role: "user", content: "hi" },
    ]),
    json([
      {
        role: "user",
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "b" },
        ],
      },
    ]),
    json([
      { role: "user", content: "q" },
      { role: "assistant", content: null },
      { role: "tool", content: "r", name: "t" },
    ]),
    json([
      { role: "developer", content: "" },
      { role: "user", content: "\ud83d" },
    ]),
  ],
  response_format: [json({ type: "text" }), "null"],
  content: [json("hello"), json("")],
  // A forward's request (the peer port), in its own field names.
  maxTokens: ["1", "2", "1000000"],
  topP: ["0.5", "1"],
  cacheSalt: [json("tenant-1")],
  traceId: [json("trace-1"), json("a/b:c")],
  hops: ["0", "1", "64"],
  attempt: ["0", "7", "1000000"],
  deadlineMs: ["0", "1", "3600000"],
  waitMs: ["0", "100"],
  final: ["true"],
  queueDepth: ["0", "1000000"],
};

/** Printable ASCII, as HTTP header values allow. */
export const printable = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
  maxLength: 200,
});

/** A snapshot the core codec encodes, from sender `sender`, as the starting point of byte damage. */
export function validSnapshotBytes(sender: string): Buffer {
  return Buffer.from(
    encodeSnapshot({
      kind: "full",
      header: { sender, epoch: 1, version: 1, tokenCount: 64, capacity: 4096, queueDepth: 0, pushBackMs: 0 },
      body: { blockSize: 16, keys: Float64Array.from([1, 2, 3, 4]) },
    }),
  );
}

/** Bytes of `b` damaged: flipped, cut, extended, or random bytes instead. */
export const damagedBytes = (b: Buffer): fc.Arbitrary<Buffer> =>
  fc.oneof(
    fc
      .array(fc.tuple(fc.nat(b.length - 1), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 4 })
      .map((flips) => {
        const out = Buffer.from(b);
        for (const [i, v] of flips) out[i] = v;
        return out;
      }),
    fc.nat(b.length).map((n) => b.subarray(0, n)),
    fc.uint8Array({ maxLength: 64 }).map((extra) => Buffer.concat([b, extra])),
    fc.uint8Array({ maxLength: 512 }).map((r) => Buffer.from(r)),
  );
