/** The simulators' member-check tries (sim/hello-tries.ts), on the daemon's schedule (verify-retry.ts). */
import { describe, expect, test } from "vitest";
import { VERIFY_MAX_TRIES } from "../../src/core/node/swim/verify-retry.js";
import { DEFAULT_TIMEOUTS } from "../../src/net/transport-timeouts.js";
import { type HelloTry, helloTry } from "../../src/sim/hello-tries.js";

const RTT = 4;

/** Tries from time 0 until the check ends; `answersAt(at)` as the simulators read the member then. */
function check(answersAt: (at: number) => number | undefined): { end: HelloTry; tries: number } {
  let at = 0;
  for (let attempt = 0; ; attempt++) {
    const r = helloTry(at, attempt, answersAt(at), RTT);
    if (r.k !== "retry") return { end: r, tries: attempt + 1 };
    at = r.at;
  }
}

describe("a member check's tries", () => {
  test("a running member answers the first, after a round trip", () => {
    expect(check((at) => at)).toEqual({ end: { k: "answer", at: RTT }, tries: 1 });
  });

  test("a member down answers none: no after every try and the daemon's backoff (about 46 s)", () => {
    const { end, tries } = check(() => undefined);
    expect(tries).toBe(VERIFY_MAX_TRIES);
    expect(end).toEqual({ k: "unreachable", at: 45_750 + VERIFY_MAX_TRIES * RTT });
  });

  test("a frozen member answers once it resumes, within the tries; past them, no", () => {
    const frozen = (until: number) => (at: number) => Math.max(at, until);
    expect(check(frozen(3_000)).end).toEqual({ k: "answer", at: 3_000 + RTT / 2 });
    const late = check(frozen(20_000));
    expect(late.end.k).toBe("answer");
    expect(late.end.at).toBeGreaterThanOrEqual(20_000);
    expect(check(frozen(1e9)).end.k).toBe("unreachable");
  });

  test("an answer that would arrive after the try's wait is not taken: the try fails then", () => {
    // Resumes just inside the wait, but its answer lands a half round trip after the daemon gave up.
    const WAIT = DEFAULT_TIMEOUTS.messageTotalMs;
    expect(helloTry(0, 0, WAIT - RTT / 4, RTT)).toEqual({ k: "retry", at: WAIT + 250 });
    expect(helloTry(0, 0, WAIT - RTT / 2, RTT)).toEqual({ k: "answer", at: WAIT });
  });

  test("a running member cut off by a partition answers no try: each waits out its time", () => {
    const WAIT = DEFAULT_TIMEOUTS.messageTotalMs;
    expect(helloTry(0, 0, 0, RTT, true)).toEqual({ k: "retry", at: WAIT + 250 });
    expect(helloTry(0, VERIFY_MAX_TRIES - 1, 0, RTT, true)).toEqual({ k: "unreachable", at: WAIT });
    expect(helloTry(0, 0, 0, RTT, false)).toEqual({ k: "answer", at: RTT });
  });
});
