/** SWIM's wire codec (swim/codec.ts): every message round-trips at its size; bad input is refused. */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import {
  decodeSwim,
  encodeSwim,
  MAX_INCARNATION,
  SwimDecodeError,
  swimSize,
} from "../../src/core/node/swim/codec.js";
import type { MemberUpdate, SwimMessage } from "../../src/core/node/swim/types.js";

const id = fc.stringMatching(/^[A-Za-z0-9._-]{1,64}$/);
const update: fc.Arbitrary<MemberUpdate> = fc
  .record({
    id,
    status: fc.constantFrom("alive", "suspect", "dead", "left"),
    incarnation: fc.nat({ max: Number.MAX_SAFE_INTEGER }),
    from: fc.option(id, { nil: undefined }),
  })
  .map((u) => {
    const { from, ...rest } = u;
    return from === undefined ? rest : { ...rest, from };
  }) as fc.Arbitrary<MemberUpdate>;
const updates = fc.array(update, { maxLength: 8 });
const seq = fc.nat({ max: 2 ** 40 });
const message: fc.Arbitrary<SwimMessage> = fc.oneof(
  fc.record({ type: fc.constant("ping" as const), seq, updates }),
  fc.record({ type: fc.constant("ping-req" as const), seq, target: id, updates }),
  fc.record({ type: fc.constant("ack" as const), seq, updates }),
  fc.record({ type: fc.constant("nack" as const), seq }),
  fc.record({ type: fc.constant("gossip" as const), updates }),
  fc.record({ type: fc.constant("sync" as const), members: updates, reply: fc.boolean() }),
  fc.record({ type: fc.constant("goodbye" as const), incarnation: fc.nat() }),
);

describe("swim codec", () => {
  test("round-trips every message, at exactly swimSize bytes", () => {
    fc.assert(
      fc.property(message, (m) => {
        const bytes = encodeSwim(m);
        expect(bytes.length).toBe(swimSize(m));
        expect(decodeSwim(bytes)).toEqual(m);
      }),
    );
  });

  test("refuses truncated, trailing or oversized input with a clear error", () => {
    const m: SwimMessage = { type: "gossip", updates: [{ id: "a", status: "alive", incarnation: 3 }] };
    const b = encodeSwim(m);
    expect(() => decodeSwim(b.subarray(0, b.length - 1))).toThrow(SwimDecodeError);
    expect(() => decodeSwim(Uint8Array.from([...b, 0]))).toThrow(/trailing/);
    expect(() => decodeSwim(b, 0)).toThrow(/at most 0/);
    expect(() => decodeSwim(Uint8Array.of(99))).toThrow(/unknown type/);
  });

  test("bounds incarnations to exact numbers: the ceiling round-trips, beyond it is refused", () => {
    const top: SwimMessage = { type: "goodbye", incarnation: MAX_INCARNATION };
    expect(decodeSwim(encodeSwim(top))).toEqual(top);
    const over = encodeSwim({ type: "goodbye", incarnation: 2 ** 55 });
    expect(() => decodeSwim(over)).toThrow(/incarnation too large/);
    const update = encodeSwim({
      type: "gossip",
      updates: [{ id: "a", status: "suspect", incarnation: 2 ** 54 }],
    });
    expect(() => decodeSwim(update)).toThrow(/incarnation too large/);
  });
});
