/** `peers`: bounded when the settings are read, a YAML list or map alike. */
import { describe, expect, it } from "vitest";
import { resolveNodeSettings } from "../../src/server/settings/index.js";

describe("the peers setting", () => {
  it("refuses more than 256 peers when the settings are read, a list or a map alike", () => {
    const base = { id: "A", listen: "127.0.0.1:0", peerListen: "127.0.0.1:0", insecure: true };
    const list = Array.from({ length: 257 }, (_, i) => `P${i}=http://127.0.0.1:${10_000 + i}`);
    const map = Object.fromEntries(list.map((e) => e.split("=") as [string, string]));
    for (const peers of [list, map])
      expect(() => resolveNodeSettings({ ...base, peers }, {})).toThrow(
        /peers.*too many peers \(257, at most 256\)/,
      );
    expect(resolveNodeSettings({ ...base, peers: list.slice(0, 256) }, {}).peers).toHaveLength(256);
  });
});
