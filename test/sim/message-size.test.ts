/** The simulator's byte accounting counts what a forward-ack says, its epoch included. */
import { describe, expect, it } from "vitest";
import { messageBytes } from "../../src/sim/message-size.js";

describe("messageBytes: forward-ack", () => {
  it("counts the epoch it carries (gossip mode), and nothing for an ack without one", () => {
    const plain = messageBytes({ type: "forward-ack", reqId: "r1", attempt: 1 });
    const withEpoch = messageBytes({
      type: "forward-ack",
      reqId: "r1",
      attempt: 1,
      epoch: 1_733_380_000_000,
    });
    expect(withEpoch - plain).toBe(7);
  });
});
