/**
 * A 3-node `prefixmesh cluster` (mutual TLS when openssl is there, sim engine) through the official
 * openai client: it serves, routes a request to the peer holding its prefix, keeps slow acked
 * forwards, falls back fast from a frozen or killed peer, and measures RTT from gossip alone.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BLOCK_SIZE } from "../../src/core/block-hash.js";
import { opensslAvailable } from "../../src/net/auth/openssl.js";
import { type ClusterInfo, type Spawned, waitFor, words } from "./helpers.js";
import { simClusterSpawner } from "./sim-cluster-cli.js";

const haveOpenssl = await opensslAvailable();
type Usage = { prompt_tokens_details?: { cached_tokens?: number } };
/**
 * Words (= sim-engine tokens) of a prefix that B holds and A's requests reuse. The cluster runs the
 * default policy, cost-aware, which forwards only when the prefill saved beats renting the prefix,
 * i.e. about expected reuse (≈ 7, the demand prior) × RTT. A's prefill cost as calibrated at boot on
 * the time-scaled sim engine is ≈ 0.04 ms/token, so 12000 tokens (≈ 480 ms saved) forward while A's RTT
 * to B reads under ≈ 70 ms. The first RTT samples include TLS set-up (30-300 ms on a loaded 2-core
 * box): A rightly keeps the prefix local until a sample reads the peer as near. A shorter prefix left
 * too little room: on a busy machine A's RTT to B can read above 15 ms for tens of seconds.
 */
const SHARED = 12_000;
/** A's RTT to B must read under this before a routed request is sent (inside the ≈ 70 ms). */
const NEAR_MS = 40;

const spawnSimCluster = simClusterSpawner();

describe("3-node cluster (mTLS, sim engine) through the official openai client", () => {
  let cluster: Spawned;
  let info: ClusterInfo;
  let model: string;
  const client = (i: number) =>
    new OpenAI({ baseURL: `${info.nodes[i]?.apiUrl}/v1`, apiKey: "unused", maxRetries: 0, timeout: 20_000 });

  /** A's view of a peer: estimate size (all of its tree A knows) and the RTT A measured to it. */
  const peerAtA = async (id: string) => {
    const v = (await (await fetch(`${info.nodes[0]?.apiUrl}/cluster`)).json()) as {
      peers: { id: string; estimateTokens: number; rttMs?: number | null; held?: { version: number } }[];
    };
    const b = v.peers.find((p) => p.id === id);
    return {
      tokens: b?.estimateTokens ?? 0,
      rttMs: b?.rttMs ?? Number.POSITIVE_INFINITY,
      version: b?.held?.version ?? -1,
    };
  };
  const bAtA = () => peerAtA("B");
  /** The peer's own tree version. */
  const treeVersionOf = async (id: string) => {
    const n = info.nodes.find((x) => x.id === id);
    return ((await (await fetch(`${n?.apiUrl}/cluster`)).json()) as { treeVersion: number }).treeVersion;
  };
  /**
   * Until A's estimate of peer `id` holds `tokens`, is of the peer's current tree (so its header, with
   * its queue depth, came after any forward A sent it: gossip scuttlebutt sends a header only with a
   * change of the tree) and A measures it as near (see SHARED).
   */
  const waitUntilHolds = (id: string, tokens: number, what: string) =>
    waitFor(
      async () => {
        const b = await peerAtA(id);
        return b.tokens >= tokens && b.rttMs < NEAR_MS && b.version === (await treeVersionOf(id));
      },
      // Generous: on a loaded 2-core box RTT samples read inflated for a while (a test's budget is 60 s).
      40_000,
      `A's estimate of ${id} to include ${what} at its current version, and A's RTT to ${id} to read < ${NEAR_MS} ms`,
    );
  const waitUntilBHolds = (tokens: number, what: string) => waitUntilHolds("B", tokens, what);

  beforeAll(async () => {
    cluster = spawnSimCluster(3, "--poll-ms", "100");
    info = JSON.parse(await cluster.waitForLine(/"ready":true/, 60_000)) as ClusterInfo;
    model = (await client(0).models.list()).data[0]?.id as string;
  });
  afterAll(async () => {
    if (cluster?.child.exitCode === null) {
      cluster.child.kill("SIGTERM");
      await cluster.exited;
    }
  });

  it("serves completions, chat and streaming", async () => {
    // Without openssl the launcher falls back to a shared secret (and says so).
    expect(info.auth).toBe(haveOpenssl ? "mtls" : "shared-secret");
    const c = await client(0).completions.create({
      model,
      prompt: "Once upon a time there was",
      max_tokens: 2,
    });
    expect(c.choices[0]?.text.length).toBeGreaterThan(0);
    expect(c.usage?.prompt_tokens).toBeGreaterThan(0);
    const chat = await client(1).chat.completions.create({
      model,
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hello there" },
      ],
      max_tokens: 2,
    });
    expect(chat.choices[0]?.message.content?.length).toBeGreaterThan(0);
    const stream = await client(2).chat.completions.create({
      model,
      messages: [{ role: "user", content: "stream please" }],
      max_tokens: 3,
      stream: true,
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text.length).toBeGreaterThan(0);
  });

  it("routes a request entering at A to B, which holds its prefix, with cached tokens > 0", async () => {
    const prefix = words("fewshot", SHARED);
    const atB = await client(1)
      .completions.create({ model, prompt: `${prefix} question one`, max_tokens: 1 })
      .withResponse();
    expect(atB.response.headers.get("x-prefixmesh-served-by")).toBe("B");
    await waitUntilBHolds(SHARED, "the prefix");
    const { data, response } = await client(0)
      .completions.create({ model, prompt: `${prefix} question two`, max_tokens: 1 })
      .withResponse();
    expect(response.headers.get("x-prefixmesh-served-by")).toBe("B");
    expect(response.headers.get("x-prefixmesh-hops")).toBe("1");
    expect((data.usage as Usage).prompt_tokens_details?.cached_tokens).toBeGreaterThanOrEqual(
      SHARED - BLOCK_SIZE,
    );
  });

  it("keeps a slow forward the peer acked: no fallback at the ack timeout", async () => {
    const prefix = words("fewshot", SHARED); // held by B since the previous test
    const acks = async () =>
      ((await (await fetch(`${info.nodes[0]?.apiUrl}/cluster`)).json()) as { stats: { ackTimeouts: number } })
        .stats.ackTimeouts;
    const before = await acks();
    await waitUntilBHolds(SHARED, "the prefix");
    const t0 = performance.now();
    // ~1 s of modelled decoding at B (10000 tokens × 5 ms × time scale 0.02): four ack timeouts long.
    const { response } = await client(0)
      .completions.create({ model, prompt: `${prefix} a long answer`, max_tokens: 10_000 })
      .withResponse();
    expect(performance.now() - t0).toBeGreaterThan(500);
    expect(response.headers.get("x-prefixmesh-served-by")).toBe("B");
    expect(await acks()).toBe(before);
  });

  it("falls back in about a second, not the 30 s forward timeout, when the peer freezes", async () => {
    // C holds the prefix, then stops (SIGSTOP): its sockets stay open, so no connection fails. The
    // missing forward-ack (1 s) or the failure detector (3 silent polls, 300 ms here) tells A, whichever
    // comes first; the slow-forward test above shows acks do not cut short a peer that is merely slow.
    const prefix = words("frozen", SHARED);
    const c = info.nodes[2]!;
    const before = (await peerAtA("C")).tokens;
    await client(2).completions.create({ model, prompt: `${prefix} warm`, max_tokens: 1 });
    await waitUntilHolds("C", before + SHARED, "the frozen prefix");
    // A forward to C while it runs opens A's channel to C, so a frozen C can only show as a missing ack.
    const warm = await client(0)
      .completions.create({ model, prompt: `${prefix} open the channel`, max_tokens: 1 })
      .withResponse();
    expect(warm.response.headers.get("x-prefixmesh-served-by")).toBe("C");
    await waitUntilHolds("C", before + SHARED, "the frozen prefix");
    const fallbacksBefore = (
      (await (await fetch(`${info.nodes[0]?.apiUrl}/cluster`)).json()) as { stats: { fallbacks: number } }
    ).stats.fallbacks;
    process.kill(c.pid, "SIGSTOP");
    try {
      const t0 = performance.now();
      const { response } = await client(0)
        .completions.create({ model, prompt: `${prefix} while frozen`, max_tokens: 1 })
        .withResponse();
      expect(response.headers.get("x-prefixmesh-served-by")).not.toBe("C");
      // Not the forward timeout: half of it leaves a machine many times slower than idle room. (The
      // counts below cannot tell it: by then C would be suspected, and acks may have timed out.)
      expect(performance.now() - t0).toBeLessThan(15_000);
      const v = (await (await fetch(`${info.nodes[0]?.apiUrl}/cluster`)).json()) as {
        stats: { fallbacks: number; ackTimeouts: number };
        peers: { id: string; suspected: boolean }[];
      };
      // It was forwarded to C and fell back, by one signal or the other.
      expect(v.stats.fallbacks).toBeGreaterThan(fallbacksBefore);
      expect(v.stats.ackTimeouts > 0 || v.peers.find((p) => p.id === "C")?.suspected).toBe(true);
    } finally {
      process.kill(c.pid, "SIGCONT");
    }
  });

  it("measures every peer's round trip from anti-entropy alone (snapshot at/echo headers)", async () => {
    // No request has gone from C to anyone: its RTT samples can only come from the gossip echo.
    const c = info.nodes[2]!;
    await waitFor(
      async () => {
        const v = (await (await fetch(`${c.apiUrl}/cluster`)).json()) as {
          peers: { id: string; rttMs?: number | null }[];
        };
        return v.peers.length === 2 && v.peers.every((p) => typeof p.rttMs === "number" && p.rttMs >= 0);
      },
      10_000,
      "C to have an RTT sample for every peer",
    );
  });

  it("answers a bad body with an OpenAI-style 400", async () => {
    const r = await fetch(`${info.nodes[0]?.apiUrl}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, messages: "not a list" }),
    });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: { type: string } }).error.type).toBe("invalid_request_error");
  });

  it.skipIf(!haveOpenssl)(
    "refuses a snapshot from a client without a cluster certificate at the handshake",
    async () => {
      const b = info.nodes[1]!;
      const before = (await (await fetch(`${b.apiUrl}/cluster`)).json()) as {
        stats: { snapshotsReceived: object };
      };
      const err = await fetch(`${b.peerUrl}/peer/snapshot`, {
        method: "POST",
        headers: { "content-type": "application/octet-stream", "x-prefixmesh-sender": "A" },
        body: new Uint8Array([1, 2, 3]),
      }).catch((e: Error) => e);
      expect(err).toBeInstanceOf(Error);
      const after = (await (await fetch(`${b.apiUrl}/cluster`)).json()) as {
        stats: { snapshotsReceived: { invalid: number } };
      };
      expect(after.stats.snapshotsReceived.invalid).toBe(
        (before.stats.snapshotsReceived as { invalid: number }).invalid,
      );
    },
  );

  it("answers once, from a fallback, when the serving peer is killed mid-request (§3.3)", async () => {
    const prefix = words("crashprefix", SHARED);
    const b = info.nodes[1]!;
    const a = info.nodes[0]!;
    const before = (await bAtA()).tokens;
    await client(1).completions.create({ model, prompt: `${prefix} warm`, max_tokens: 1 });
    await waitUntilBHolds(before + SHARED, "the crash prefix");
    // ~2 s of modelled decoding at B (20000 tokens × 5 ms × time scale 0.02): kill B half-way.
    const t0 = performance.now();
    const pending = client(0)
      .completions.create({ model, prompt: `${prefix} after crash`, max_tokens: 20_000 })
      .withResponse();
    await waitFor(
      async () => {
        const v = (await (await fetch(`${b.apiUrl}/cluster`)).json()) as { queueDepth: number };
        return v.queueDepth > 0;
      },
      5000,
      "B to start the forwarded request",
    );
    process.kill(b.pid, "SIGKILL");
    const { data, response } = await pending;
    expect(data.choices[0]?.text.length).toBeGreaterThan(0);
    expect(response.headers.get("x-prefixmesh-served-by")).toBe("A");
    // The reset connection is noticed at once: no waiting for the 30 s forward timeout.
    expect(performance.now() - t0).toBeLessThan(15_000);
    const v = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as { stats: { fallbacks: number } };
    expect(v.stats.fallbacks).toBeGreaterThanOrEqual(1);
    // Liveness rides on SWIM's probes (the daemon's gossip "scuttlebutt"), not on the failed forward:
    // A suspects B within its detection time (probe periods, then suspicion: well under 30 s here).
    await waitFor(
      async () => {
        const c = (await (await fetch(`${a.apiUrl}/cluster`)).json()) as {
          peers: { id: string; suspected: boolean }[];
        };
        return c.peers.find((p) => p.id === "B")?.suspected === true;
      },
      30_000,
      "A to suspect B",
    );
  });
});
