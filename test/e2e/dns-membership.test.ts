/**
 * `--peers-dns` end to end, loopback only: three node processes whose "DNS" answers come from a file
 * (`--peers-dns-file`, never a real name). One address per node, as DNS gives them: 127.0.0.1-3, all on
 * the same peer port. A knows nobody statically and finds B and C by DNS; B and C also list each other
 * statically (static + DNS combined). The daemon's default mode, gossip "scuttlebutt", takes DNS
 * names as seeds: C's address leaving the answer does not remove C (it is alive and B gossips with
 * it); C leaves by stopping, and every member then shows it down. (Under `--gossip full` DNS is the
 * membership and an address leaving it removes its peer: test/server/dns-membership.test.ts.)
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { initCa, issueNodeCert } from "../../src/net/auth/ca.js";
import { opensslAvailable } from "../../src/net/auth/openssl.js";
import { writeSecretFile } from "../../src/net/auth/secret.js";
import { modelOf, postCompletion } from "../api-client.js";
import { type Spawned, spawnCli, waitFor, words } from "./helpers.js";

const HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"] as const;
const IDS = ["A", "B", "C"] as const;
const NAME = "mesh.prefixmesh.test";

interface PeerRow {
  id: string;
  url?: string;
  liveness: string;
  estimateTokens: number;
}

function listen(host: string, port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once("error", () => resolve(undefined));
    s.listen(port, host, () => {
      const a = s.address();
      s.close(() => resolve(typeof a === "object" && a ? a.port : undefined));
    });
  });
}

/** A port free on every one of HOSTS (the peer port all DNS records share). */
async function sharedFreePort(): Promise<number> {
  for (let i = 0; i < 20; i++) {
    const p = await listen(HOSTS[1], 0);
    if (p === undefined) continue;
    const others = await Promise.all([listen(HOSTS[0], p), listen(HOSTS[2], p)]);
    if (others.every((x) => x === p)) return p;
  }
  throw new Error("no port free on 127.0.0.1-3");
}

describe("peers from DNS (--peers-dns, injected resolver file)", () => {
  let dir: string;
  let dnsFile: string;
  const nodes: { id: string; api: string; proc: Spawned }[] = [];
  let model: string;

  const setDns = (hosts: readonly string[]) => writeFile(dnsFile, JSON.stringify({ [NAME]: hosts }));
  const view = async (i: number) =>
    (await (await fetch(`${nodes[i]?.api}/cluster`)).json()) as {
      peers: PeerRow[];
      discovery: { url: string; status: string; id?: string }[];
    };
  const peersOf = async (i: number) => (await view(i)).peers;
  const complete = async (i: number, prompt: string) => {
    const r = await postCompletion(nodes[i]?.api as string, { model, prompt, max_tokens: 1 });
    expect(r.status).toBe(200);
    return r.headers.get("x-prefixmesh-served-by");
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "prefixmesh-dns-"));
    dnsFile = join(dir, "dns.json");
    await setDns(HOSTS);
    const mtls = await opensslAvailable();
    let auth: string[];
    if (mtls) {
      const cred = join(dir, "ca");
      await initCa(cred, { clusterId: "dns-test" });
      for (const id of IDS) await issueNodeCert(cred, id);
      auth = ["--tls-dir", cred];
    } else {
      await writeSecretFile(join(dir, "secret"));
      auth = ["--secret-file", join(dir, "secret")];
    }
    const scheme = mtls ? "https" : "http";
    const peerPort = await sharedFreePort();
    const statics = ["", `C=${scheme}://${HOSTS[2]}:${peerPort}`, `B=${scheme}://${HOSTS[1]}:${peerPort}`];
    for (const [i, id] of IDS.entries()) {
      const apiPort = (await listen("127.0.0.1", 0)) as number;
      const proc = spawnCli(
        [
          "node",
          "--id",
          id,
          "--listen",
          `127.0.0.1:${apiPort}`,
          "--peer-listen",
          `${HOSTS[i]}:${peerPort}`,
          ...(statics[i] ? ["--peers", statics[i] as string] : []),
          "--peers-dns",
          `${NAME}:${peerPort}`,
          "--peers-dns-file",
          dnsFile,
          "--peers-dns-interval-ms",
          "200",
          "--engine",
          "sim",
          "--sim-time-scale",
          "0.02",
          "--poll-ms",
          "100",
          // Membership, not the routing rule, is under test: affinity routes to whichever member holds
          // a prefix, so "routes to them" / "no longer routed to" hinge on membership alone. The
          // default (cost-aware) keeps a 300-token prefix local at these startup RTTs, rightly.
          "--policy",
          "affinity",
          ...auth,
        ],
        { PREFIXMESH_EXIT_WITH_PARENT: "1" },
      );
      nodes.push({ id, api: `http://127.0.0.1:${apiPort}`, proc });
    }
    await Promise.all(nodes.map((n) => n.proc.waitForLine(/"msg":"node started"/, 30_000)));
    model = await modelOf(nodes[0]?.api as string);
  });

  afterAll(async () => {
    if (process.env.DNS_DEBUG) for (const n of nodes) console.log(n.id, n.proc.output());
    await Promise.all(
      nodes.map(async (n) => {
        if (n.proc.child.exitCode === null) {
          n.proc.child.kill("SIGTERM");
          await n.proc.exited;
        }
      }),
    );
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("A finds B and C by DNS (skipping itself), sees them live and routes to them", async () => {
    await waitFor(
      async () => {
        const peers = await peersOf(0);
        return ["B", "C"].every((id) => peers.find((p) => p.id === id)?.liveness === "live");
      },
      15_000,
      "A to see B and C live",
    );
    const peers = await peersOf(0);
    expect(peers.map((p) => p.id).sort()).toEqual(["B", "C"]);
    // /cluster shows what DNS gave and what became of each address (its own: "self"), once the
    // address's hello is answered: SWIM may see a member live before its DNS entry is resolved.
    const resolved = async () => {
      const discovery = (await view(0)).discovery;
      return {
        self: discovery.find((d) => d.url.includes(HOSTS[0]))?.status,
        peers: discovery
          .filter((d) => d.status === "peer")
          .map((d) => d.id)
          .sort(),
      };
    };
    await waitFor(
      async () => {
        const r = await resolved();
        return r.self === "self" && r.peers.length === 2;
      },
      15_000,
      "A's discovery to resolve every address",
    );
    expect(await resolved()).toEqual({ self: "self", peers: ["B", "C"] });
    expect(peers.find((p) => p.id === "B")?.url).toContain(HOSTS[1]);
    // B has C statically and A from DNS; its DNS copy of C does not duplicate the static entry.
    await waitFor(
      async () => (await peersOf(1)).find((p) => p.id === "A")?.liveness === "live",
      15_000,
      "B to see A live",
    );
    expect((await peersOf(1)).map((p) => p.id).sort()).toEqual(["A", "C"]);

    for (const [i, id] of [
      [1, "B"],
      [2, "C"],
    ] as const) {
      const prefix = words(`dnsprefix${id}`, 300);
      expect(await complete(i, `${prefix} warm`)).toBe(id);
      await waitFor(
        async () => ((await peersOf(0)).find((p) => p.id === id)?.estimateTokens ?? 0) >= 256,
        10_000,
        `A's estimate of ${id} to include its prefix`,
      );
      expect(await complete(0, `${prefix} question`)).toBe(id);
    }
  });

  it("an address that leaves DNS stays a member while it lives (DNS names seeds; SWIM keeps members)", async () => {
    const prefixC = words("dnsprefixC", 300);
    await setDns([HOSTS[0], HOSTS[1]]);
    await waitFor(
      async () => !(await view(0)).discovery.some((d) => d.url.includes(HOSTS[2])),
      10_000,
      "A's discovery to drop C's address",
    );
    // Membership is SWIM's (the removal went through DNS membership's removePeer, a no-op for a
    // member SWIM holds): C still answers its probes and B still gossips with it, so C stays.
    expect((await peersOf(0)).find((p) => p.id === "C")?.liveness).toBe("live");
    expect(await complete(0, `${prefixC} still`)).toBe("C");
    // A member leaves by stopping: its goodbye marks it down everywhere, shown while remembered.
    const c = nodes[2]?.proc as Spawned;
    c.child.kill("SIGTERM");
    await c.exited;
    for (const i of [0, 1])
      await waitFor(
        async () => (await peersOf(i)).find((p) => p.id === "C")?.liveness === "down",
        10_000,
        `${IDS[i]} to show C down after its goodbye`,
      );
    const gone = (await peersOf(0)).find((p) => p.id === "C") as PeerRow & { goneForMs?: number };
    expect(gone.estimateTokens).toBe(0);
    expect(gone.goneForMs).toBeGreaterThanOrEqual(0);
    // C's prefix (A's estimate of C held it a moment ago) is now served by a member.
    expect(await complete(0, `${prefixC} again`)).not.toBe("C");
  });
});
