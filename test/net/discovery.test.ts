import { describe, expect, it, vi } from "vitest";
import {
  checkPeerHello,
  DiscoveryError,
  DnsPeerDiscovery,
  type HelloExpectation,
  type PeerAddress,
  parseDnsTarget,
  parsePeerList,
  parseStaticPeers,
  systemResolver,
} from "../../src/net/discovery.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";

describe("static peers", () => {
  it("parses id=url lists", () => {
    expect(
      parseStaticPeers("A=https://127.0.0.1:9001, B=http://10.0.0.2:9002/,C=https://[::1]:9003"),
    ).toEqual([
      { id: "A", url: "https://127.0.0.1:9001" },
      { id: "B", url: "http://10.0.0.2:9002" },
      { id: "C", url: "https://[::1]:9003" },
    ]);
    expect(parseStaticPeers("")).toEqual([]);
  });

  it("rejects bad ids, schemes, duplicates, self and junk with clear errors", () => {
    expect(() => parseStaticPeers("A")).toThrow(/ID=URL/);
    expect(() => parseStaticPeers("a b=http://x:1")).toThrow(/invalid peer id 'a b'/);
    expect(() => parseStaticPeers(`${"x".repeat(65)}=http://x:1`)).toThrow(/invalid peer id/);
    expect(() => parseStaticPeers("A=ftp://x:1")).toThrow(/http:\/\/ or https:\/\//);
    expect(() => parseStaticPeers("A=not a url")).toThrow(/invalid peer URL/);
    expect(() => parseStaticPeers("A=http://u:p@x:1")).toThrow(/credentials/);
    expect(() => parseStaticPeers("A=http://x:1/path")).toThrow(/no path/);
    expect(() => parseStaticPeers("A=http://x:1,A=http://y:1")).toThrow(/listed twice/);
    expect(() => parseStaticPeers("A=http://x:1", { self: "A" })).toThrow(/own id/);
    expect(() => parseStaticPeers("A=http://x:1")).not.toThrow();
    const many = Array.from({ length: 300 }, (_, i) => `n${i}=http://x:${i + 1}`).join(",");
    expect(() => parseStaticPeers(many)).toThrow(/too many peers/);
  });

  it("accepts config-file lists and maps", () => {
    expect(parsePeerList([{ id: "B", url: "http://127.0.0.1:9002" }])).toEqual([
      { id: "B", url: "http://127.0.0.1:9002" },
    ]);
    expect(parsePeerList({ B: "http://127.0.0.1:9002" })).toEqual([
      { id: "B", url: "http://127.0.0.1:9002" },
    ]);
    expect(() => parsePeerList([{ id: "B" }])).toThrow(DiscoveryError);
    expect(() => parsePeerList("B=http://x")).toThrow(/list of/);
  });

  it("takes a YAML list of ID=URL strings, as --peers and a list of join seeds are written", () => {
    expect(parsePeerList(["B=http://127.0.0.1:9002", " C = http://127.0.0.1:9003 "])).toEqual([
      { id: "B", url: "http://127.0.0.1:9002" },
      { id: "C", url: "http://127.0.0.1:9003" },
    ]);
    expect(() => parsePeerList(["http://127.0.0.1:9002"])).toThrow(/must look like ID=URL/);
    expect(() => parsePeerList(["B=http://127.0.0.1:9002", { id: "B", url: "http://x:1" }])).toThrow(
      /listed twice/,
    );
    expect(() => parsePeerList([5])).toThrow(/peers\[0\]: not a peer: give \{ id, url \} or 'ID=URL'/);
    expect(() => parsePeerList([`B=http://${"h".repeat(5000)}:1`])).toThrow(
      /^peers\[0\] is longer than 4096/,
    );
    const many = Array.from({ length: 257 }, (_, i) => `P${i}=http://127.0.0.1:${10_000 + i}`);
    expect(() => parsePeerList(many)).toThrow(/too many peers \(257, at most 256\)/);
  });

  it("bounds a YAML map's ids and urls as the list's, without quoting a long one back", () => {
    const longUrl = `http://${"h".repeat(100_000)}:1`;
    expect(() => parsePeerList([{ id: "B", url: longUrl }])).toThrow(/^peers\[0\]: url is invalid/);
    const url = (() => {
      try {
        return parsePeerList({ B: longUrl });
      } catch (e) {
        return (e as Error).message;
      }
    })();
    expect(url).toMatch(/^peers\.B: url is invalid \(at most 2048 characters\)/);
    expect(String(url).length).toBeLessThan(200);
    const id = (() => {
      try {
        return parsePeerList({ C: "http://127.0.0.1:9003", ["x".repeat(100_000)]: "http://127.0.0.1:9002" });
      } catch (e) {
        return (e as Error).message;
      }
    })();
    expect(id).toMatch(/^peers: key 1 is no node id: use 1-64 characters/);
    expect(String(id).length).toBeLessThan(200);
    const many = Object.fromEntries(
      Array.from({ length: 257 }, (_, i) => [`P${i}`, `http://127.0.0.1:${10_000 + i}`]),
    );
    expect(() => parsePeerList(many)).toThrow(/too many peers \(257, at most 256\)/);
  });
});

describe("DNS target", () => {
  it("parses name[:port]", () => {
    expect(parseDnsTarget("prefixmesh.default.svc.cluster.local", 9080)).toEqual({
      host: "prefixmesh.default.svc.cluster.local",
      port: 9080,
    });
    expect(parseDnsTarget("pm-headless:9443", 9080)).toEqual({ host: "pm-headless", port: 9443 });
    expect(() => parseDnsTarget("pm:99999", 9080)).toThrow(/1..65535/);
    expect(() => parseDnsTarget("bad name", 9080)).toThrow(/DNS name/);
    expect(() => parseDnsTarget("http://pm", 9080)).toThrow(DiscoveryError);
  });

  it("refuses names the system resolver would read as an address (as --join does)", () => {
    for (const name of ["0x7f000001", "0x7f000001:9080", "mesh.0x1", "0x", "1.2.3", "127.1", "mesh.10"])
      expect(() => parseDnsTarget(name, 9080), name).toThrow(/not a valid IPv4 address/);
    expect(() => parseDnsTarget("0x7f000001", 9080)).toThrow(
      /^invalid --peers-dns '0x7f000001': host '0x7f000001' is not a valid IPv4 address/,
    );
    // Names that only look like hex or digits at the start are names.
    expect(parseDnsTarget("0xfeed.svc", 9080)).toEqual({ host: "0xfeed.svc", port: 9080 });
    expect(parseDnsTarget("10-0-0-7.pods", 9080)).toEqual({ host: "10-0-0-7.pods", port: 9080 });
    expect(() => parseDnsTarget("mesh:0", 9080)).toThrow(/port must be 1..65535/);
  });
});

/** A fake resolver: answers from a mutable table, or throws when set to an Error. */
function fakeResolver() {
  const state: { answer: string[] | Error } = { answer: [] };
  const resolve = vi.fn(async (_host: string) => {
    if (state.answer instanceof Error) throw state.answer;
    return [...state.answer];
  });
  return { state, resolve };
}

describe("DNS discovery", () => {
  it("reports added and removed addresses across re-resolves", async () => {
    const { state, resolve } = fakeResolver();
    const changes: { added: PeerAddress[]; removed: PeerAddress[] }[] = [];
    const d = new DnsPeerDiscovery({
      target: { host: "pm.svc", port: 9080 },
      scheme: "https",
      resolver: resolve,
      onChange: (c) => changes.push(c),
    });
    state.answer = ["10.0.0.2", "10.0.0.1", "fd00::7", "10.0.0.1", "garbage"];
    await d.refresh();
    expect(resolve).toHaveBeenCalledWith("pm.svc");
    expect(changes).toHaveLength(1);
    expect(changes[0]?.added.map((p) => p.url)).toEqual([
      "https://10.0.0.1:9080",
      "https://10.0.0.2:9080",
      "https://[fd00::7]:9080",
    ]);
    await d.refresh(); // nothing changed → no event
    expect(changes).toHaveLength(1);
    state.answer = ["10.0.0.2", "10.0.0.3"];
    await d.refresh();
    expect(changes[1]?.added.map((p) => p.address)).toEqual(["10.0.0.3"]);
    expect(changes[1]?.removed.map((p) => p.address).sort()).toEqual(["10.0.0.1", "fd00::7"]);
    expect(d.current().map((p) => p.address)).toEqual(["10.0.0.2", "10.0.0.3"]);
  });

  it("keeps the current peers when a lookup fails, and reports the error", async () => {
    const { state, resolve } = fakeResolver();
    const errors: Error[] = [];
    const onChange = vi.fn();
    const d = new DnsPeerDiscovery({
      target: { host: "pm.svc", port: 9080 },
      scheme: "http",
      resolver: resolve,
      onChange,
      onError: (e) => errors.push(e),
    });
    state.answer = ["10.0.0.1"];
    await d.refresh();
    state.answer = new Error("SERVFAIL");
    await d.refresh();
    expect(errors.map((e) => e.message)).toEqual(["SERVFAIL"]);
    expect(d.current().map((p) => p.url)).toEqual(["http://10.0.0.1:9080"]);
    expect(onChange).toHaveBeenCalledTimes(1);
  });

  it("re-resolves periodically after start and stops on stop", async () => {
    vi.useFakeTimers();
    try {
      const { state, resolve } = fakeResolver();
      state.answer = ["10.0.0.1"];
      const onChange = vi.fn();
      const d = new DnsPeerDiscovery({
        target: { host: "pm.svc", port: 1 },
        scheme: "http",
        resolver: resolve,
        intervalMs: 1000,
        onChange,
      });
      await d.start();
      expect(resolve).toHaveBeenCalledTimes(1);
      state.answer = ["10.0.0.1", "10.0.0.9"];
      await vi.advanceTimersByTimeAsync(1000);
      expect(resolve).toHaveBeenCalledTimes(2);
      expect(onChange).toHaveBeenCalledTimes(2);
      d.stop();
      await vi.advanceTimersByTimeAsync(5000);
      expect(resolve).toHaveBeenCalledTimes(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it("reports a throwing listener as an error instead of crashing the timer", async () => {
    const { state, resolve } = fakeResolver();
    state.answer = ["10.0.0.1"];
    const errors: string[] = [];
    const d = new DnsPeerDiscovery({
      target: { host: "x", port: 1 },
      scheme: "http",
      resolver: resolve,
      onChange: () => {
        throw new Error("listener broke");
      },
      onError: (e) => errors.push(e.message),
    });
    await expect(d.refresh()).resolves.toBeUndefined();
    expect(errors).toEqual(["listener broke"]);
  });

  it("caps the number of addresses", async () => {
    const { state, resolve } = fakeResolver();
    state.answer = Array.from({ length: 1000 }, (_, i) => `10.0.${i >> 8}.${i & 255}`);
    const d = new DnsPeerDiscovery({
      target: { host: "x", port: 1 },
      scheme: "http",
      resolver: resolve,
      onChange: () => {},
    });
    await d.refresh();
    expect(d.current()).toHaveLength(256);
  });

  it("system resolver finds localhost and returns [] for a name that does not exist", async () => {
    const r = systemResolver(3000);
    expect((await r("localhost")).length).toBeGreaterThan(0);
    // NXDOMAIN means zero peers; a sandbox without DNS may fail the lookup instead, which is also "no peers"
    expect(await r("no-such-host.invalid").catch(() => [])).toEqual([]);
  });
});

describe("checkPeerHello", () => {
  const expected: HelloExpectation = { cluster: "c1", model: "generated", self: "A", authMode: "mtls" };

  it("accepts a peer of the same cluster and model (unknown fields ignored)", () => {
    expect(
      checkPeerHello(expected, {
        id: "B",
        cluster: "c1",
        model: "generated",
        protocol: PROTOCOL_VERSION,
        extra: 1,
      }),
    ).toEqual({
      ok: true,
      hello: { id: "B", cluster: "c1", model: "generated", protocol: PROTOCOL_VERSION },
    });
  });

  it("refuses other clusters, other models, other protocols, itself, a wrong id and malformed answers", () => {
    const reason = (h: unknown, e: Partial<HelloExpectation> = {}) => {
      const r = checkPeerHello(
        { ...expected, ...e },
        h && typeof h === "object" ? { protocol: PROTOCOL_VERSION, ...h } : h,
      );
      return r.ok ? "ok" : r.reason;
    };
    expect(reason({ id: "B", cluster: "c1", model: "generated", protocol: PROTOCOL_VERSION + 1 })).toBe(
      "wrong-protocol",
    );
    // A node of the previous version (its signatures are not ours either).
    expect(reason({ id: "B", cluster: "c1", model: "generated", protocol: PROTOCOL_VERSION - 1 })).toBe(
      "wrong-protocol",
    );
    // A later node that still speaks ours is a peer (protocol-range.ts); minProtocol is bounded by protocol.
    const hello = (protocol: number, minProtocol?: unknown) => ({
      id: "B",
      cluster: "c1",
      model: "generated",
      protocol,
      minProtocol,
    });
    expect(reason(hello(PROTOCOL_VERSION + 1, PROTOCOL_VERSION))).toBe("ok");
    expect(reason(hello(PROTOCOL_VERSION + 1, PROTOCOL_VERSION + 1))).toBe("wrong-protocol");
    expect(reason(hello(PROTOCOL_VERSION, PROTOCOL_VERSION + 1))).toBe("malformed");
    expect(reason(hello(PROTOCOL_VERSION, 2.5))).toBe("malformed");
    expect(reason(hello(PROTOCOL_VERSION, -1))).toBe("malformed");
    expect(reason(hello(PROTOCOL_VERSION, "3"))).toBe("malformed");
    expect(reason(hello(2_000_000, 1_000_001))).toBe("malformed");
    expect(reason({ id: "B", cluster: "c1", model: "generated", protocol: undefined })).toBe("malformed");
    expect(reason({ id: "B", cluster: "c.1/x", model: "generated" })).toBe("malformed");
    expect(reason({ id: "B", cluster: "c2", model: "generated" })).toBe("wrong-cluster");
    expect(reason({ id: "B", cluster: "c1", model: "other.gguf" })).toBe("wrong-model");
    // Another --gossip mode cannot join our mesh; a hello that names none (an older node) is not judged.
    const gossiping = (gossip: unknown, ours?: "full" | "scuttlebutt") =>
      reason({ id: "B", cluster: "c1", model: "generated", gossip }, { gossip: ours });
    expect(gossiping("full", "scuttlebutt")).toBe("wrong-gossip");
    expect(gossiping("scuttlebutt", "full")).toBe("wrong-gossip");
    expect(gossiping("scuttlebutt", "scuttlebutt")).toBe("ok");
    expect(gossiping(undefined, "scuttlebutt")).toBe("ok");
    expect(gossiping("full", undefined)).toBe("ok");
    expect(gossiping("gossipsub", "full")).toBe("malformed");
    expect(reason({ id: "A", cluster: "c1", model: "generated" })).toBe("self");
    expect(reason({ id: "C", cluster: "c1", model: "generated" }, { peerId: "B" })).toBe("wrong-id");
    expect(reason({ id: "B", cluster: "c1", model: "generated" }, { peerId: "B" })).toBe("ok");
    expect(reason({ id: "B c", cluster: "c1", model: "generated" })).toBe("malformed");
    expect(reason({ id: "B", cluster: "c1", model: "x".repeat(300) })).toBe("malformed");
    expect(reason(null)).toBe("malformed");
    expect(reason("hello")).toBe("malformed");
  });
});
