/** `--peers-dns` naming nothing (a typo, or no pod published yet): the node says so, not only stays alone. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { DnsMembership, type DnsMembershipPorts } from "../../src/server/runtime/dns-membership.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("a --peers-dns name with no address", () => {
  it("is warned about at the first look-up and about once a minute while it stays empty", async () => {
    vi.useFakeTimers();
    const warnings: Record<string, unknown>[] = [];
    const logger = {
      info() {},
      debug() {},
      error() {},
      warn: (obj: object, msg?: string) => void warnings.push({ ...obj, msg }),
    };
    let records: string[] = [];
    const dns = new DnsMembership({
      target: { host: "mesh.typo", port: 9080 },
      scheme: "http",
      resolver: async () => records,
      intervalMs: 1_000,
      expect: { cluster: "c", model: "m", self: "A", authMode: "insecure" },
      ports: {
        probeHello: () => Promise.reject(new Error("ECONNREFUSED")),
        hasPeer: () => false,
        isStatic: () => false,
      } as unknown as DnsMembershipPorts,
      logger,
    });
    await dns.start();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ name: "mesh.typo", msg: expect.stringMatching(/no address/) });
    await vi.advanceTimersByTimeAsync(150_000);
    expect(warnings).toHaveLength(3);
    // An address turns up (its probe fails here: no peer behind it), then leaves: warned afresh at once.
    records = ["10.0.0.2"];
    await vi.advanceTimersByTimeAsync(1_000);
    const before = warnings.filter((w) => /no address/.test(String(w.msg))).length;
    records = [];
    await vi.advanceTimersByTimeAsync(1_000);
    expect(warnings.filter((w) => /no address/.test(String(w.msg))).length).toBe(before + 1);
    dns.stop();
  });
});
