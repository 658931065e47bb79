import { describe, expect, it } from "vitest";
import { replyStream } from "../../src/net/reply-stream.js";
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

describe("reply stream: the deferred ack", () => {
  it("sends the ack of a forward whose answer does not start within the defer time, once", async () => {
    const slow = carrier();
    const quick = carrier();
    const s1 = replyStream(undefined, slow.c);
    const s2 = replyStream(undefined, quick.c);
    s1.ack();
    s1.ack(); // the node may ack a duplicate again: still one ack record
    s2.ack();
    s2.chunk("x"); // the answer started: the ack is implied, none is sent
    await wait(40);
    expect(slow.wrote).toEqual(["ack"]);
    s1.finish(resultFor(fwd("A-1"), "done"));
    s2.finish(resultFor(fwd("A-2"), "x"));
    await wait(30);
    expect(slow.wrote).toEqual(["ack", "final"]);
    expect(quick.wrote).toEqual(["chunk:x", "final"]);
  });

  it("sends no ack after the answer, nor one asked for after it", async () => {
    const k = carrier();
    const s = replyStream(undefined, k.c);
    s.ack();
    s.finish(resultFor(fwd("A-3"), ""));
    s.ack();
    await wait(40);
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
    await wait(5);
    expect(k.wrote).toEqual(["chunk:a", "chunk:b", "final"]);
    expect(s.closed).toBe(true);
  });
});
