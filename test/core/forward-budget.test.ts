/**
 * A forward under admission by expected wait (`maxWaitMs`): the budget it carries leaves out the way
 * there even to a peer whose RTT is not measured yet, and the origin does not give up on an acked
 * forward as overdue while the peer may still, by that budget, be waiting to start it.
 */
import { describe, expect, it } from "vitest";
import { type NodeConfigInput, resolveNodeConfig } from "../../src/core/node/config.js";
import { type AttemptClock, ForwardAcks } from "../../src/core/node/forward-acks.js";
import { Targets } from "../../src/core/node/targets.js";
import type { Effect } from "../../src/core/node/types.js";

const BOUND = 5_000;

function setup(over: Partial<NodeConfigInput> = {}) {
  const config = resolveNodeConfig({ id: "A", peers: ["B", "C"], capacityTokens: 1_000, ...over });
  const targets = new Targets();
  targets.reset(["B", "C"]);
  return { config, targets, acks: new ForwardAcks(config, targets) };
}

/** An attempt of a request admitted at 0, sent at `sentAt`. */
function attempt(sentAt: number): AttemptClock {
  return {
    reqId: "r",
    request: { id: "r", tokens: Uint32Array.of(1, 2, 3), maxTokens: 1 },
    receivedAt: 0,
    attempt: 1,
    attemptSentAt: sentAt,
    ackedAt: -1,
    ackArmed: false,
    probes: 0,
    timeouts: 0,
    answerBy: Number.POSITIVE_INFINITY,
    answerWindowMs: 0,
    outputSinceSend: false,
    deadlineAt: Number.POSITIVE_INFINITY,
    forwardTimeoutMs: 30_000,
  };
}

describe("a forward's wait budget", () => {
  it("leaves out a round trip to a peer not measured yet: the typical one, else the prior", () => {
    const { config, targets, acks } = setup({ maxWaitMs: BOUND });
    const budget = (to: string, now: number) => {
      const a = attempt(now);
      acks.begin(a, now);
      const out: Effect[] = [];
      acks.send(a, to, targets.get(to) ?? expect.unreachable(), now, out);
      const sent = out.find((e) => e.type === "send" && e.msg.type === "forward");
      return sent?.type === "send" && sent.msg.type === "forward" ? sent.msg.waitMs : undefined;
    };
    // No peer measured: the configured prior.
    expect(budget("B", 100)).toBe(BOUND - 100 - config.costPrior.rttMs);
    targets.sampleRtt("C", 40);
    // B is not measured yet: it costs what the peers measured do.
    expect(budget("B", 100)).toBe(BOUND - 100 - 40);
    expect(budget("C", 100)).toBe(BOUND - 100 - 40);
  });
});

describe("an acked forward's answer deadline (peer trust)", () => {
  const deadline = (over: Partial<NodeConfigInput>) => {
    const { config, acks } = setup({ peerTrust: true, ...over });
    const a = attempt(1_000);
    // Acked without an ETA: our own estimate of the answer (800 ms) is all the origin has.
    acks.acked(a, "B", undefined, 800, 1_010, []);
    return { answerBy: a.answerBy, slack: config.answerSlack * 800 + config.answerSlackMs };
  };

  it("allows the peer the wait it took the forward under, on top of the usual slack", () => {
    const bounded = deadline({ maxWaitMs: BOUND });
    // Sent 1 s after admission: the peer may wait up to the 4 s left before it starts the run.
    expect(bounded.answerBy).toBe(1_000 + bounded.slack + (BOUND - 1_000));
    // Without a bound, as before: the usual slack over our estimate.
    const free = deadline({});
    expect(free.answerBy).toBe(1_000 + free.slack);
  });
});
