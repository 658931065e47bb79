/**
 * The paper's published numbers (§5, Tables 1-3), transcribed so every table we print stands beside
 * them. Latencies in seconds, rates as fractions.
 */

export const PAPER_TABLE1 = {
  /** Mean per-request latency; no-route is the same paired baseline at every Δcomm. */
  comm: [
    { commMs: 2, routed: 0.31, noRoute: 0.323 },
    { commMs: 200, routed: 0.785, noRoute: 0.323 },
    { commMs: 1000, routed: 2.271, noRoute: 0.323 },
  ],
  skewed: { commMs: 2, routed: 0.206, noRoute: 0.266 },
} as const;

/** Δcomm = 2 ms, Δpoll = 500 ms. */
export const PAPER_TABLE2 = {
  uniformNoRoute: { expectedHit: 0.473, actualHit: 0.831, latency: 0.323 },
  uniformRouted: { expectedHit: 0.664, actualHit: 0.837, latency: 0.31 },
  skewedNoRoute: { expectedHit: 0.674, actualHit: 0.856, latency: 0.266 },
  skewedRouted: { expectedHit: 0.886, actualHit: 0.914, latency: 0.206 },
} as const;

/** Share of requests served by the single most-loaded node. */
export const PAPER_TABLE3 = {
  uniformNoRoute: 0.287,
  skewedNoRoute: 0.347,
  comm: [
    { commMs: 1000, hotspot: 0.649 },
    { commMs: 200, hotspot: 0.674 },
    { commMs: 2, hotspot: 0.7 },
  ],
  poll: [
    { pollMs: 20, hotspot: 0.748 },
    { pollMs: 100, hotspot: 0.757 },
    { pollMs: 2000, hotspot: 0.669 },
    { pollMs: 300_000, hotspot: 0.422 },
  ],
  skewedRouted: 0.881,
} as const;

/** Setup (§4): four nodes, each 10% of an H100's memory, Qwen2.5-0.5B (~14 KB of KV per token). */
export const PAPER_SETUP = {
  nodes: 4,
  kvBytesPerToken: 14_000,
  meanPromptTokens: 540,
  jitterMsAt2: 0.5,
} as const;
