/** `--join`: seed addresses parsed into peer URLs, bad ones refused with a message naming them. */

import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { parseDnsTarget, parseStaticPeers } from "../../src/net/discovery.js";
import { parseHostPort } from "../../src/net/host-port.js";
import { TransportError } from "../../src/net/transport-error.js";
import { freePort } from "../../src/server/cluster/launcher.js";
import { MAX_JOIN, parseJoin } from "../../src/server/runtime/mesh-seeds.js";
import { SeedStates } from "../../src/server/runtime/seed-states.js";
import { startNode } from "../../src/server/runtime/start-node.js";
import { resolveNodeSettings } from "../../src/server/settings/index.js";
import { modelOf, postCompletion } from "../api-client.js";
import { requireBuild, waitFor } from "../e2e/helpers.js";

const settings = (o: Record<string, unknown>) =>
  resolveNodeSettings(
    { id: "A", engine: "sim", logLevel: "silent", listen: "127.0.0.1:0", peerListen: "127.0.0.1:0", ...o },
    {},
  );
const logger = pino({ level: "silent" });

describe("--join", () => {
  it("turns HOST:PORT seeds (a string or a YAML list) into peer URLs of the cluster's scheme, deduplicated", () => {
    expect(parseJoin("10.0.0.2:9080, seed.local:9080,10.0.0.2:9080", "https")).toEqual([
      "https://10.0.0.2:9080",
      "https://seed.local:9080",
    ]);
    expect(parseJoin(["[::1]:9080"], "http")).toEqual(["http://[::1]:9080"]);
    expect(parseJoin(undefined, "http")).toEqual([]);
    expect(parseJoin("", "http")).toEqual([]);
  });

  it("refuses what is not HOST:PORT, port 0 or above 65535, and too many seeds", () => {
    expect(() => parseJoin("http://a:1", "http")).toThrow(/must be HOST:PORT/);
    expect(() => parseJoin("a", "http")).toThrow(/'a' must be HOST:PORT/);
    expect(() => parseJoin("a:0", "http")).toThrow(/HOST:PORT/);
    expect(() => parseJoin("a:70000", "http")).toThrow(/HOST:PORT/);
    const many = Array.from({ length: MAX_JOIN + 1 }, (_, i) => `h${i}:1`).join(",");
    expect(() => parseJoin(many, "http")).toThrow(/at most 64/);
  });

  it("takes host names with underscores (Docker's container names), FQDNs, IPv4 and IPv6 literals", () => {
    expect(parseJoin("proj_node_1:9080,_seed.example.:9080, Node-2.LOCAL:1", "http")).toEqual([
      "http://proj_node_1:9080",
      "http://_seed.example.:9080",
      "http://Node-2.LOCAL:1",
    ]);
    expect(parseJoin(["127.0.0.1:65535", "[fd00::7]:9080", "[::ffff:10.0.0.1]:9080"], "https")).toEqual([
      "https://127.0.0.1:65535",
      "https://[fd00::7]:9080",
      "https://[::ffff:10.0.0.1]:9080",
    ]);
    expect(parseHostPort("proj_node_1:9080")).toEqual({ host: "proj_node_1", port: 9080 });
    // Hex only in the last label is an address; elsewhere, or not hex, it is a name.
    expect(parseJoin("0x7f.example:9080,node.0xg:9080,xn--bcher-kva.example:1", "http")).toEqual([
      "http://0x7f.example:9080",
      "http://node.0xg:9080",
      "http://xn--bcher-kva.example:1",
    ]);
  });

  it("every seed it takes starts a SeedStates with the host as written (lower-cased)", () => {
    const seeds = [
      "Node-2.LOCAL:1",
      "_seed.example.:9080",
      "node.0xg:9080",
      "10.0.0.2:9080",
      "[fd00::7]:9080",
    ];
    const urls = parseJoin(seeds, "http");
    const view = new SeedStates(urls).view();
    expect(view.map((v) => v.seed)).toEqual(seeds.map((s) => s.toLowerCase()));
  });

  it.each([
    ["[fd00::_7]:9080", /'\[fd00::_7\]' is not an IPv6 address in brackets/],
    ["[fe80::1%eth0]:9080", /not an IPv6 address/],
    ["[::1:9080", /not an IPv6 address/],
    ["::1:9080", /needs brackets/],
    ["proj node:9080", /'proj node' is not a host name/],
    ["-node:9080", /not a host name/],
    ["node-:9080", /not a host name/],
    ["a..b:9080", /not a host name/],
    [":9080", /must be HOST:PORT/],
    ["node:", /numeric port/],
    ["node:http", /numeric port/],
    ["node:0", /port must be 1\.\.65535/],
    ["999.1.1.1:9080", /not a valid IPv4 address/],
    ["10.0.0:9080", /not a valid IPv4 address/],
    [`${"a".repeat(64)}:9080`, /not a host name/],
    // URL parsers read a hex last label as IPv4 (0x7f000001 is 127.0.0.1) or refuse the name.
    ["0x7f000001:9080", /'0x7f000001' is not a valid IPv4 address/],
    ["0xdead:9080", /not a valid IPv4 address/],
    ["node.0x1:9080", /not a valid IPv4 address/],
    ["node.0X:9080", /not a valid IPv4 address/],
    ["xn--a.example:9080", /'xn--a.example' is not a host name a URL takes as written/],
  ])("refuses %s, naming the entry", (bad, why) => {
    const spec = `good_1:9080,${bad}`;
    expect(() => parseJoin(spec, "http")).toThrow(why);
    expect(() => parseJoin(spec, "http")).toThrow(`--join seed '${bad}' must be HOST:PORT`);
  });

  it("names a bad seed and where it came from: flag, environment or config file", () => {
    const flags = { id: "A", engine: "sim" };
    expect(() => resolveNodeSettings({ ...flags, join: "ok_1:1,bad seed:1" }, {})).toThrow(
      /^--join: seed 'bad seed:1' must be HOST:PORT .*: host 'bad seed' is not a host name/,
    );
    expect(() => resolveNodeSettings(flags, { PREFIXMESH_JOIN: "[::_1]:9080" })).toThrow(
      /^PREFIXMESH_JOIN: seed '\[::_1\]:9080'/,
    );
    const dir = mkdtempSync(join(tmpdir(), "pm-join-"));
    const file = join(dir, "node.yaml");
    writeFileSync(file, "join:\n  - proj_node_1:9080\n  - proj_node_2\n");
    expect(() => resolveNodeSettings({ ...flags, config: file }, {})).toThrow(
      new RegExp(`^join in ${file}: seed 'proj_node_2' must be HOST:PORT`),
    );
    writeFileSync(file, "join: [proj_node_1:9080, proj_node_2:9080]\n");
    expect(resolveNodeSettings({ ...flags, config: file }, {}).join).toEqual([
      "proj_node_1:9080",
      "proj_node_2:9080",
    ]);
  });

  it("on the command line: a message naming the entry and exit code 2", () => {
    const r = spawnSync(
      process.execPath,
      [requireBuild(), "node", "--id", "A", "--engine", "sim", "--join", "proj_node_1:9080,proj node_2:9080"],
      { encoding: "utf8", timeout: 60_000, env: { PATH: process.env.PATH ?? "" } },
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/--join: seed 'proj node_2:9080' must be HOST:PORT/);
  });

  it("--peers, --peers-dns, --advertise and --listen take underscores in host names too", () => {
    expect(parseStaticPeers("B=http://proj_node_2:9080")).toEqual([
      { id: "B", url: "http://proj_node_2:9080" },
    ]);
    expect(() => parseStaticPeers("B=http://proj node:9080")).toThrow(/invalid peer URL/);
    expect(parseDnsTarget("proj_peers", 9080)).toEqual({ host: "proj_peers", port: 9080 });
    expect(() => parseDnsTarget("proj peers", 9080)).toThrow(/invalid --peers-dns/);
    const s = resolveNodeSettings(
      { id: "A", engine: "sim", advertise: "proj_node_1:9080", listen: "0.0.0.0:0" },
      {},
    );
    expect(s.advertise).toBe("proj_node_1:9080");
    expect(() => resolveNodeSettings({ id: "A", advertise: "proj node:9080" }, {})).toThrow(
      /^--advertise: 'proj node:9080': host 'proj node' is not a host name/,
    );
    expect(() => resolveNodeSettings({ id: "A", listen: "127.0.0.1" }, {})).toThrow(
      /^--listen: '127.0.0.1' must be HOST:PORT/,
    );
  });

  it("is refused without --gossip scuttlebutt", async () => {
    const full = settings({ join: "127.0.0.1:1", insecure: true, gossip: "full" });
    await expect(startNode(full, { logger })).rejects.toThrow(/--join needs --gossip scuttlebutt/);
    // Seeds without credentials (or --insecure): an unauthenticated cluster.
    await expect(
      startNode(settings({ gossip: "scuttlebutt", join: "127.0.0.1:1" }), { logger }),
    ).rejects.toThrow(/without peer authentication/);
  });
});

describe("a seed's state, as /cluster shows it", () => {
  it("classifies each attempt: unresolvable, unreachable, refused (an HTTP refusal, or its hello), joined", () => {
    const url = "http://proj_node_1:9080";
    const st = new SeedStates([url]);
    const one = () => st.view()[0];
    expect(one()).toMatchObject({
      seed: "proj_node_1:9080",
      state: "pending",
      attempts: 0,
      lastAttemptAt: null,
    });
    st.failed(url, new TransportError("connection", "ENOTFOUND: getaddrinfo ENOTFOUND proj_node_1"));
    expect(one()).toMatchObject({ state: "unresolvable", attempts: 1, retrying: true });
    st.failed(url, new TransportError("connection", "ECONNREFUSED: connect ECONNREFUSED 172.18.0.3:9080"));
    expect(one()).toMatchObject({ state: "unreachable", attempts: 2, reason: null });
    st.failed(url, new TransportError("timeout", "headers timeout"));
    expect(one()).toMatchObject({ state: "unreachable", attempts: 3 });
    st.failed(url, new TransportError("http", "answered 403 to /peer/hello", 403));
    expect(one()).toMatchObject({ state: "refused", reason: "http-403", retrying: true });
    // A refusing hello is asked again too, after its backoff: the view says when.
    const at = Date.UTC(2030, 0, 1);
    st.answered(url, "Z", { reason: "wrong-cluster", message: "peer is in cluster 'x'" }, undefined, at);
    expect(one()).toMatchObject({
      state: "refused",
      reason: "wrong-cluster",
      memberId: "Z",
      retrying: true,
      nextAttemptAt: "2030-01-01T00:00:00.000Z",
    });
    st.answered(url, "B", "joined");
    expect(one()).toMatchObject({
      state: "joined",
      memberId: "B",
      error: null,
      reason: null,
      attempts: 6,
      retrying: false,
      nextAttemptAt: null,
    });
  });

  it("shows the addresses the last attempt's name resolved to and the one it reached, bounded", () => {
    const url = "http://proj_node_1:9080";
    const st = new SeedStates([url]);
    expect(st.view()[0]).toMatchObject({ addresses: [], reached: null });
    const many = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"];
    const refused = new TransportError("connection", "ECONNREFUSED: connect ECONNREFUSED 10.0.0.1:9080");
    st.failed(url, refused, { resolved: many, reached: undefined });
    expect(st.view()[0]).toMatchObject({ state: "unreachable", addresses: many.slice(0, 4), reached: null });
    // Each address bounded too, whatever filled the record.
    const long = `fd00::${"a".repeat(100)}`;
    st.failed(url, refused, { resolved: [long], reached: long });
    const v = st.view()[0]!;
    expect(v.addresses[0]).toHaveLength(64);
    expect(v.reached).toHaveLength(64);
    // Each attempt says its own: an answer at one address of two, then a name that resolves to nothing.
    st.answered(url, "B", "joined", { resolved: ["10.0.0.7", "10.0.0.8"], reached: "10.0.0.8" });
    expect(st.view()[0]).toMatchObject({ addresses: ["10.0.0.7", "10.0.0.8"], reached: "10.0.0.8" });
    st.failed(url, new TransportError("connection", "getaddrinfo ENOTFOUND proj_node_1"), {
      resolved: [],
      reached: undefined,
    });
    expect(st.view()[0]).toMatchObject({ state: "unresolvable", addresses: [], reached: null });
    // The view is a copy: changing it changes nothing held.
    st.view()[0]!.addresses.push("x");
    expect(st.view()[0]!.addresses).toEqual([]);
  });

  it("keeps the first 200 characters of an error, whatever answered at the seed's address", () => {
    const url = "http://seed:9080";
    const st = new SeedStates([url]);
    const body = "<html>".padEnd(64 * 1024, "x");
    st.failed(url, new TransportError("protocol", `invalid hello: ${body}`));
    const { error, state } = st.view()[0]!;
    expect(state).toBe("refused");
    expect(error).toHaveLength(200);
    expect(error).toMatch(/^invalid hello: <html>x+…$/);
    // Classified by the whole message, stored cut.
    st.failed(url, new TransportError("connection", `${"y".repeat(300)} ENOTFOUND seed`));
    expect(st.view()[0]).toMatchObject({ state: "unresolvable", error: `${"y".repeat(199)}…` });
    st.failed(url, new TransportError("timeout", "short"));
    expect(st.view()[0]!.error).toBe("short");
  });
});

describe("a lone scuttlebutt node without credentials (no seeds, no peers)", () => {
  it("starts, warns once, and admits no member that tries to join through it", async () => {
    const warnings: string[] = [];
    const recording = pino({ level: "warn" }, { write: (line: string) => void warnings.push(line) });
    const a = await startNode(settings({ gossip: "scuttlebutt" }), { logger: recording });
    let b: Awaited<ReturnType<typeof startNode>> | undefined;
    try {
      expect(warnings.filter((w) => /no peer authentication/.test(w))).toHaveLength(1);
      // B (insecure) names A as its seed: A cannot check B's credential, so it never admits B.
      const seed = new URL(a.peerUrl).host;
      b = await startNode(settings({ id: "B", gossip: "scuttlebutt", insecure: true, join: seed }), {
        logger,
      });
      await waitFor(
        async () =>
          /prefixmesh_peer_auth_rejected_total\{[^}]*reason="mesh-verify"[^}]*\} [1-9]/.test(
            await (await fetch(`${a.apiUrl}/metrics`)).text(),
          ),
        15_000,
        "A to refuse B's join",
      );
      const peers = async (n: { apiUrl: string }) =>
        ((await (await fetch(`${n.apiUrl}/cluster`)).json()) as { peers: unknown[] }).peers;
      expect(await peers(a)).toEqual([]);
      // Still alone: it serves its own clients.
      const model = await modelOf(a.apiUrl);
      expect((await postCompletion(a.apiUrl, { model, prompt: "alone", max_tokens: 1 })).status).toBe(200);
      expect(warnings.filter((w) => /no peer authentication/.test(w))).toHaveLength(1);
    } finally {
      await Promise.all([a.stop(), b?.stop()]);
    }
  });

  it("with --insecure is a seed others join through (members verified without credentials)", async () => {
    const a = await startNode(settings({ gossip: "scuttlebutt", insecure: true }), { logger });
    let b: Awaited<ReturnType<typeof startNode>> | undefined;
    try {
      b = await startNode(
        settings({ id: "B", gossip: "scuttlebutt", insecure: true, join: new URL(a.peerUrl).host }),
        { logger },
      );
      const holds = (n: { runtime: { clusterView(): unknown } }, id: string) =>
        (n.runtime.clusterView() as { peers: { id: string }[] }).peers.some((p) => p.id === id);
      const nb = b;
      await waitFor(() => holds(a, "B") && holds(nb, "A"), 15_000, "A and B to become members of each other");
    } finally {
      await Promise.all([a.stop(), b?.stop()]);
    }
  });

  it("shows each --join seed in /cluster: joined as its member, unreachable, unresolvable", async () => {
    const a = await startNode(settings({ gossip: "scuttlebutt", insecure: true }), { logger });
    let b: Awaited<ReturnType<typeof startNode>> | undefined;
    try {
      const good = new URL(a.peerUrl).host;
      const closed = `127.0.0.1:${await freePort("127.0.0.1")}`;
      const unknown = "no_such_seed.invalid:9080";
      const byName = `localhost:${new URL(a.peerUrl).port}`; // the same node, through the resolver
      b = await startNode(
        settings({ id: "B", gossip: "scuttlebutt", insecure: true, join: [good, closed, unknown, byName] }),
        { logger },
      );
      const seedsOf = async (n: { apiUrl: string }) =>
        ((await (await fetch(`${n.apiUrl}/cluster`)).json()) as { seeds: Record<string, unknown>[] }).seeds;
      const nb = b;
      const states = async (): Promise<Record<string, Record<string, unknown>>> =>
        Object.fromEntries((await seedsOf(nb)).map((s) => [s.seed, s]));
      await waitFor(
        async () => {
          const s = await states();
          return (
            s[good]?.member === "alive" &&
            s[byName]?.state === "joined" &&
            s[closed]?.state === "unreachable" &&
            s[unknown]?.state === "unresolvable"
          );
        },
        30_000,
        "B's /cluster to show its three seeds' states",
      );
      const s = await states();
      expect(Object.keys(s)).toEqual([good, closed, unknown, byName]);
      expect(s[byName]?.addresses).toContain("127.0.0.1");
      expect(s[byName]).toMatchObject({ memberId: "A", reached: "127.0.0.1" });
      expect(s[good]).toMatchObject({ state: "joined", memberId: "A", retrying: false, error: null });
      // Where each attempt went: the address reached, an address nothing listens at, none at all.
      expect(s[good]).toMatchObject({ addresses: ["127.0.0.1"], reached: "127.0.0.1" });
      expect(s[closed]).toMatchObject({ state: "unreachable", memberId: null, retrying: true });
      expect(s[closed]).toMatchObject({ addresses: ["127.0.0.1"], reached: null });
      expect(s[closed]?.error).toMatch(/ECONNREFUSED/);
      expect(s[unknown]).toMatchObject({ state: "unresolvable", member: null, retrying: true });
      expect(s[unknown]).toMatchObject({ addresses: [], reached: null });
      for (const x of Object.values(s)) {
        expect(x.attempts as number).toBeGreaterThanOrEqual(1);
        expect(Date.parse(x.lastAttemptAt as string)).toBeGreaterThan(0);
      }
      // A node given no seeds shows an empty list, not nothing.
      expect(await seedsOf(a)).toEqual([]);
    } finally {
      await Promise.all([a.stop(), b?.stop()]);
    }
  });
});
