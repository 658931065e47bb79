import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { describe, expect, it, vi } from "vitest";
import { freePort } from "../../src/server/cluster/free-port.js";

function ephemeralLow(): number | undefined {
  try {
    return Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
  } catch {
    return undefined;
  }
}

describe("freePort", () => {
  it("hands out distinct ports below the ephemeral range that bind", async () => {
    const ports: number[] = [];
    for (let i = 0; i < 40; i++) ports.push(await freePort("127.0.0.1"));
    expect(new Set(ports).size).toBe(ports.length);
    const low = ephemeralLow();
    for (const p of ports) {
      expect(p).toBeGreaterThanOrEqual(10_000);
      if (low !== undefined) expect(p).toBeLessThan(low);
    }
    const s = createServer();
    await new Promise<void>((r, j) => {
      s.once("error", j);
      s.listen(ports[0], "127.0.0.1", r);
    });
    s.close();
  });

  it("never hands out a port fetch refuses to connect to (the Fetch standard's bad port 10080)", async () => {
    const high = ephemeralLow() ?? 49_152;
    // The draw maps [0, 1) onto [10000, high): first 10080, then whatever comes.
    const draws = [(10_080 - 10_000 + 0.5) / (high - 10_000)];
    const random = Math.random.bind(Math);
    const spy = vi.spyOn(Math, "random").mockImplementation(() => draws.shift() ?? random());
    try {
      const port = await freePort("127.0.0.1");
      expect(draws).toHaveLength(0);
      expect(port).not.toBe(10_080);
    } finally {
      spy.mockRestore();
    }
    // What the skip avoids: fetch refuses the port before connecting at all.
    await expect(fetch("http://127.0.0.1:10080/")).rejects.toMatchObject({ cause: { message: "bad port" } });
  });

  it("fails at once, naming the cause, on a host it can never bind", async () => {
    // TEST-NET-1 is never a local address; .invalid never resolves (RFC 6761).
    await expect(freePort("192.0.2.1")).rejects.toThrow(/cannot bind 192\.0\.2\.1: .*EADDRNOTAVAIL/);
    await expect(freePort("no-such-host.invalid")).rejects.toThrow(
      /cannot bind no-such-host\.invalid: .*(ENOTFOUND|EAI_AGAIN)/,
    );
  }, 30_000);
});
