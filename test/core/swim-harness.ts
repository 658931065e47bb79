/** A test harness shared by the SWIM tests (swim-membership, swim-join, swim-forged, swim-revival). */
import type { SwimConfigInput } from "../../src/core/node/swim/config.js";
import { Swim } from "../../src/core/node/swim/swim.js";
import type { SwimEffect, SwimMessage } from "../../src/core/node/swim/types.js";

/** One Swim with a hand-driven clock; `verify` answers its verify-member effects. */
export function harness(self = "a", seeds: string[] = [], config: SwimConfigInput = {}, bootAt = 0) {
  let now = bootAt;
  const swim = new Swim(self, seeds, { now: () => now, random: () => 0.5 }, config);
  const sent: { to: string; msg: SwimMessage }[] = [];
  const verifies: string[] = [];
  const run = (effects: SwimEffect[]) => {
    for (const e of effects) {
      if (e.type === "send") sent.push({ to: e.to, msg: e.msg });
      if (e.type === "verify-member") verifies.push(e.id);
    }
    return effects;
  };
  const admit = (who: string, incarnation = 0) => {
    run(
      swim.handle({
        type: "message",
        from: "x",
        msg: { type: "gossip", updates: [{ id: who, status: "alive", incarnation }] },
      }),
    );
    run(swim.handle({ type: "verified", id: who, ok: true }));
  };
  return {
    swim,
    sent,
    verifies,
    run,
    admit,
    at: (t: number) => {
      now = t;
    },
    msg: (from: string, msg: SwimMessage) => run(swim.handle({ type: "message", from, msg })),
  };
}
