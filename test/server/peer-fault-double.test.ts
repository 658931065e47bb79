import { describe, expect, it } from "vitest";
import type { PeerServerHandlers } from "../../src/net/peer-handlers.js";
import type { ForwardReplyStream } from "../../src/net/reply-stream.js";
import type { ForwardMsg, ReplyMsg } from "../../src/net/transport-wire.js";
import { lieAbout, peerFaultDouble } from "../../src/server/runtime/peer-fault-double.js";

/** A forward's answer stream that records what the node wrote to it. */
function recordingStream() {
  const out: { acks: number; chunks: string[]; final?: ReplyMsg } = { acks: 0, chunks: [] };
  const stream: ForwardReplyStream = {
    ack: () => void out.acks++,
    chunk: (t) => void out.chunks.push(t),
    finish: (m) => {
      out.final = m;
    },
    get closed() {
      return out.final !== undefined;
    },
  };
  return { out, stream };
}

const forward = { type: "forward", reqId: "A-1-1", attempt: 0 } as unknown as ForwardMsg;

/** Handlers of an honest node that answers every forward with `text` (and counts what it saw). */
function honest(text: string) {
  const seen: string[] = [];
  const handlers = {
    onForward(_from: string, msg: ForwardMsg, stream: ForwardReplyStream) {
      seen.push(msg.reqId);
      stream.ack();
      stream.chunk(text);
      stream.finish({ type: "result", reqId: msg.reqId, attempt: msg.attempt, result: { text } } as ReplyMsg);
    },
  } as unknown as PeerServerHandlers;
  return { handlers, seen };
}

describe("the peer fault test double", () => {
  it("stall: acks a forward, never answers, never hands it to the node", () => {
    const h = honest("A B");
    const { out, stream } = recordingStream();
    peerFaultDouble("stall", h.handlers).onForward("A", forward, stream);
    expect(out.acks).toBe(1);
    expect(out.final).toBeUndefined();
    expect(h.seen).toEqual([]);
  });

  it("refuse: answers a retryable error that is no load refusal", () => {
    const h = honest("A B");
    const { out, stream } = recordingStream();
    peerFaultDouble("refuse", h.handlers).onForward("A", forward, stream);
    expect(out.final).toMatchObject({ type: "error", retryable: true, reqId: "A-1-1" });
    expect(h.seen).toEqual([]);
  });

  it("lie: runs the forward and changes every word of its chunks and result", () => {
    const h = honest("A Bc");
    const { out, stream } = recordingStream();
    peerFaultDouble("lie", h.handlers).onForward("A", forward, stream);
    expect(h.seen).toEqual(["A-1-1"]);
    expect(out.chunks).toEqual(["A~ cB~"]);
    expect(out.final?.type === "result" && out.final.result.text).toBe("A~ cB~");
    expect(lieAbout("")).toBe("");
  });
});
