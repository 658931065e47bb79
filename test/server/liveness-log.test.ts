import { describe, expect, it } from "vitest";
import { LivenessLog, type PeerLiveness } from "../../src/server/observability/liveness-log.js";

/** A logger double that keeps every line. */
function capture() {
  const lines: { level: string; msg: string; peer?: string; was?: string }[] = [];
  const at =
    (level: string) =>
    (obj: object, msg = "") =>
      lines.push({ ...obj, level, msg });
  return { lines, logger: { info: at("info"), warn: at("warn"), error: at("error"), debug: at("debug") } };
}

describe("liveness log", () => {
  it("logs each change of a peer's liveness once, and no first sighting of a live peer", () => {
    const { lines, logger } = capture();
    const log = new LivenessLog(logger);
    const round = (...peers: PeerLiveness[]) => log.check(peers);
    round({ id: "B", liveness: "unknown" }, { id: "C", liveness: "live" });
    round({ id: "B", liveness: "live" }, { id: "C", liveness: "live" });
    expect(lines).toEqual([]);
    round({ id: "B", liveness: "suspected", silentMs: 1600 }, { id: "C", liveness: "live" });
    round({ id: "B", liveness: "suspected", silentMs: 2100 }, { id: "C", liveness: "down" });
    round({ id: "B", liveness: "live" }, { id: "C", liveness: "down" });
    expect(lines.map((l) => [l.level, l.msg, l.peer, l.was])).toEqual([
      ["warn", "peer suspected", "B", "live"],
      ["warn", "peer down", "C", "live"],
      ["info", "peer live", "B", "suspected"],
    ]);
    // A member that left and came back is news again only if it is not live.
    round({ id: "B", liveness: "live" });
    round({ id: "B", liveness: "live" }, { id: "C", liveness: "suspected" });
    expect(lines.at(-1)).toMatchObject({ msg: "peer suspected", peer: "C", was: "unknown" });
  });
});
