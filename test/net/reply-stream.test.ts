import { describe, expect, it } from "vitest";
import { replyStream } from "../../src/net/reply-stream.js";
import { waitFor } from "../e2e/helpers.js";
import { fwd, resultFor } from "./fixtures.js";

/** A carrier recording what the stream wrote, in order. */
function carrier() {
  const wrote: string[] = [];
  return {
    wrote,
    c: {
      ack: () => wrote.push("ack"),
      chunk: (t: string) => wrote.push(`chunk:${t}`),
      final: () => wrote.push("final"),
      gone: () => false,
    },
  };
}
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("reply stream: the ack", () => {
  // Holding the ack back is the node's (ackDeferMs, tested in test/core): the stream only keeps an ack
  // from saying what the origin already knows.
  it("writes an ack at once, once, and none after a chunk or the answer (they imply it)", () => {
    const slow = carrier();
    const quick = carrier();
    const s1 = replyStream(undefined, slow.c);
    const s2 = replyStream(undefined, quick.c);
    s1.ack();
    s1.ack(); // the node may ack a duplicate again: still one ack record
    expect(slow.wrote).toEqual(["ack"]);
    s2.chunk("x"); // the answer started: an ack asked for now is implied, none is written
    s2.ack();
    s1.finish(resultFor(fwd("A-1"), "done"));
    s2.finish(resultFor(fwd("A-2"), "x"));
    expect(slow.wrote).toEqual(["ack", "final"]);
    expect(quick.wrote).toEqual(["chunk:x", "final"]);
  });

  it("writes no ack after the answer", () => {
    const k = carrier();
    const s = replyStream(undefined, k.c);
    s.finish(resultFor(fwd("A-3"), ""));
    s.ack();
    expect(k.wrote).toEqual(["final"]);
  });
});

describe("reply stream: under injected delay", () => {
  it("holds the whole answer one delay, then writes its records in order, and nothing after the final", async () => {
    const k = carrier();
    let release: () => void = () => {};
    const s = replyStream(() => new Promise<void>((r) => (release = r)), k.c);
    s.chunk("a");
    s.chunk("b");
    s.finish(resultFor(fwd("A-4"), "ab"));
    s.chunk("late");
    await wait(5);
    expect(k.wrote).toEqual([]); // still inside the injected delay
    release();
    await waitFor(() => k.wrote.length >= 3, 10_000, "the held records to be written");
    expect(k.wrote).toEqual(["chunk:a", "chunk:b", "final"]);
    expect(s.closed).toBe(true);
  });
});
