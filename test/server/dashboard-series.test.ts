import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  MAX_REFUSED_SHOWN,
  recheckText,
  refusedLines,
  splitReason,
} from "../../src/server/dashboard/refused.js";
import {
  History,
  increase,
  parseMetrics,
  quantile,
  type Reading,
  readingOf,
  servedByMember,
  WINDOWS,
} from "../../src/server/dashboard/series.js";

const TEXT = `# HELP prefixmesh_requests_total Client requests
# TYPE prefixmesh_requests_total counter
prefixmesh_requests_total{outcome="ok",route="local",node="A"} 3
prefixmesh_requests_total{outcome="ok",route="forwarded",node="A"} 5
prefixmesh_requests_total{outcome="overloaded",route="none",node="A"} 9
prefixmesh_requests_served_by_total{served_by="A",node="A"} 3
prefixmesh_requests_served_by_total{served_by="B",node="A"} 5
prefixmesh_prompt_tokens_total{node="A"} 1000
prefixmesh_predicted_cached_tokens_total{node="A"} 600
prefixmesh_actual_cached_tokens_total{node="A"} 500
prefixmesh_gossip_bytes_total{peer="B",direction="in",node="A"} 70
prefixmesh_gossip_bytes_total{peer="C",direction="in",node="A"} 30
prefixmesh_gossip_bytes_total{peer="B",direction="out",node="A"} 40
prefixmesh_request_duration_seconds_bucket{le="0.1",route="local",node="A"} 2
prefixmesh_request_duration_seconds_bucket{le="1",route="local",node="A"} 3
prefixmesh_request_duration_seconds_bucket{le="+Inf",route="local",node="A"} 3
prefixmesh_request_duration_seconds_bucket{le="0.1",route="forwarded",node="A"} 0
prefixmesh_request_duration_seconds_bucket{le="1",route="forwarded",node="A"} 5
prefixmesh_request_duration_seconds_bucket{le="+Inf",route="forwarded",node="A"} 5
odd line without a value
prefixmesh_x{label="a \\"quoted\\" value"} 1
`;

describe("dashboard series: reading /metrics", () => {
  it("parses samples, labels (escapes included) and +Inf", () => {
    const s = parseMetrics(TEXT);
    expect(s.find((x) => x.name === "prefixmesh_x")?.labels.label).toBe('a "quoted" value');
    expect(s.some((x) => x.labels.le === "+Inf")).toBe(true);
    expect(s.every((x) => !Number.isNaN(x.value))).toBe(true);
    expect(s.some((x) => x.name === "odd")).toBe(false);
  });

  it("sums the counters the charts need across labels", () => {
    const r = readingOf(parseMetrics(TEXT), 10, { A: 4, B: 9 });
    expect(r).toMatchObject({
      t: 10,
      // Mesh-wide, from /cluster: not the requests that entered here (the metric's 3 and 5).
      servedBy: { A: 4, B: 9 },
      local: 3,
      forwarded: 5,
      promptTokens: 1000,
      predictedCached: 600,
      actualCached: 500,
      gossipIn: 100,
      gossipOut: 40,
    });
    expect(r.latency).toEqual([
      [0.1, 2],
      [1, 8],
      [Number.POSITIVE_INFINITY, 8],
    ]);
  });

  it("takes each member's served count from /cluster, leaving out members that report none", () => {
    const v = {
      id: "A",
      served: 7,
      peers: [
        { id: "B", served: 12 },
        { id: "C", served: null },
        { id: "D" },
        { id: "E", served: -1 },
        { id: "F", served: "5" },
      ],
    };
    expect(servedByMember(v)).toEqual({ A: 7, B: 12 });
    expect(servedByMember({ id: "A" })).toEqual({});
  });

  it("treats a counter that went down as restarted from 0", () => {
    expect(increase(5, 8)).toBe(3);
    expect(increase(8, 2)).toBe(2);
  });
});

describe("dashboard series: quantiles of a histogram", () => {
  it("interpolates inside the bucket, as Prometheus's histogram_quantile", () => {
    const h: [number, number][] = [
      [0.1, 2],
      [1, 8],
      [Number.POSITIVE_INFINITY, 8],
    ];
    expect(quantile(0.25, h)).toBeCloseTo(0.1); // rank 2: the top of the first bucket
    expect(quantile(0.5, h)).toBeCloseTo(0.1 + 0.9 * (2 / 6));
    expect(quantile(0.5, [[1, 0]])).toBeNull();
    expect(
      quantile(0.99, [
        [0.5, 1],
        [Number.POSITIVE_INFINITY, 100],
      ]),
    ).toBe(0.5);
  });

  it("is monotone in q and stays within the finite bounds (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.nat(50), { minLength: 1, maxLength: 8 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (counts, q1, q2) => {
          let c = 0;
          const h: [number, number][] = counts.map((n, i) => {
            c += n;
            return [0.01 * 2 ** i, c];
          });
          const a = quantile(Math.min(q1, q2), h);
          const b = quantile(Math.max(q1, q2), h);
          if (c === 0) return a === null && b === null;
          return (
            a !== null && b !== null && a <= b + 1e-12 && a >= 0 && b <= (h.at(-1) as [number, number])[0]
          );
        },
      ),
    );
  });
});

describe("dashboard series: points over sliding windows", () => {
  const reading = (t: number, o: Partial<Reading> = {}): Reading => ({
    t,
    servedBy: {},
    local: 0,
    forwarded: 0,
    promptTokens: 0,
    predictedCached: 0,
    actualCached: 0,
    gossipIn: 0,
    gossipOut: 0,
    latency: [],
    ...o,
  });

  it("has no point before two readings, and nulls where the window holds no request", () => {
    const h = new History();
    expect(h.add(reading(0))).toBeUndefined();
    const p = h.add(reading(1, { gossipIn: 500 }));
    expect(p).toMatchObject({
      share: {},
      predictedHitPct: null,
      actualHitPct: null,
      p50Ms: null,
      p99Ms: null,
    });
    expect(p?.gossipInBytesPerSec).toBe(500);
  });

  it("shares, hit rates and rates are taken over their windows", () => {
    const h = new History();
    for (let t = 0; t <= WINDOWS.slowSec; t++) h.add(reading(t, { servedBy: { A: 0, B: 0 } }));
    // One second later: 3 served by A, 1 by B; 400 prompt tokens, 300 predicted cached, 200 actual.
    const t = WINDOWS.slowSec + 1;
    const p = h.add(
      reading(t, {
        servedBy: { A: 3, B: 1 },
        local: 3,
        forwarded: 1,
        promptTokens: 400,
        predictedCached: 300,
        actualCached: 200,
        latency: [
          [0.1, 4],
          [Number.POSITIVE_INFINITY, 4],
        ],
      }),
    );
    expect(p?.share).toEqual({ A: 75, B: 25 });
    expect(p?.predictedHitPct).toBe(75);
    expect(p?.actualHitPct).toBe(50);
    expect(p?.localPerSec).toBeCloseTo(3 / WINDOWS.rateSec);
    expect(p?.p50Ms).toBeCloseTo(50);
    // Once the requests leave the slow window, the share has nothing to say again.
    let last = p;
    for (let s = t + 1; s <= t + WINDOWS.slowSec + 1; s++)
      last = h.add(reading(s, { servedBy: { A: 3, B: 1 }, local: 3, forwarded: 1, promptTokens: 400 }));
    expect(last?.share).toEqual({ A: null, B: null });
    expect(last?.localPerSec).toBe(0);
  });

  it("counts a member first heard of mid-window from then on, and a restarted one from 0", () => {
    const h = new History();
    h.add(reading(0, { servedBy: { A: 10 } }));
    // B's first report says 500: requests it served before this page knew it, not in any window.
    h.add(reading(1, { servedBy: { A: 12, B: 500 } }));
    expect(h.points.at(-1)?.share).toEqual({ A: 100, B: 0 });
    // Then B serves 2 more, and A restarts (its count drops to 2, all new).
    h.add(reading(2, { servedBy: { A: 2, B: 502 } }));
    expect(h.points.at(-1)?.share).toEqual({ A: 50, B: 50 });
  });

  it("ignores a reading that does not move time forward, and bounds its points", () => {
    const h = new History(5);
    h.add(reading(0));
    h.add(reading(1));
    expect(h.add(reading(1))).toBeUndefined();
    for (let t = 2; t < 20; t++) h.add(reading(t));
    expect(h.points).toHaveLength(5);
  });
});

describe("dashboard: the refused candidates", () => {
  const refused = (id: string, reason: string, refusals = 1, recheckInMs = 25_000) => ({
    id,
    reason,
    refusals,
    refusedForMs: 1000,
    recheckInMs,
  });

  it("shows nothing when none is refused (or an older node says nothing)", () => {
    expect(refusedLines([])).toEqual({ lines: [], more: 0 });
    expect(refusedLines(undefined)).toEqual({ lines: [], more: 0 });
    // Entries that are not objects are skipped, not thrown on.
    expect(refusedLines([null, 3] as unknown as Parameters<typeof refusedLines>[0]).lines).toEqual([]);
  });

  it("splits the reason into its code and the message in full, with the refusals and the re-check", () => {
    const { lines, more } = refusedLines([
      refused("B", "wrong-cluster: peer 'B' belongs to cluster 'x', not 'y'", 3, 25_000),
      refused("C", "no-credential: missing", 1, 0),
    ]);
    expect(more).toBe(0);
    expect(lines[0]).toEqual({
      id: "B",
      code: "wrong-cluster",
      message: "peer 'B' belongs to cluster 'x', not 'y'",
      refusals: "3 refusals in a row",
      recheck: "re-check in 25 s",
    });
    expect(lines[1]).toMatchObject({
      code: "no-credential",
      refusals: "1 refusal in a row",
      recheck: "re-check due",
    });
    expect(recheckText(2500)).toBe("re-check in 2.5 s");
  });

  it("keeps markup in a reason as text, and a reason without a code whole", () => {
    const evil = "wrong-model: peer serves '<img src=x onerror=alert(1)>'";
    expect(splitReason(evil)).toEqual({
      code: "wrong-model",
      message: "peer serves '<img src=x onerror=alert(1)>'",
    });
    expect(splitReason("<b>no code</b>: here")).toEqual({ code: "refused", message: "<b>no code</b>: here" });
  });

  it("lists a handful, then counts the rest", () => {
    const many = Array.from({ length: MAX_REFUSED_SHOWN + 4 }, (_, i) => refused(`n${i}`, "wrong-gossip: x"));
    const { lines, more } = refusedLines(many);
    expect(lines.map((l) => l.id)).toEqual(many.slice(0, MAX_REFUSED_SHOWN).map((r) => r.id));
    expect(more).toBe(4);
  });
});
