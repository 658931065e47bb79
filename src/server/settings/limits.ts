/** Settings: Limits on what clients and peers may spend, operations, and experiment knobs. */
import { z } from "zod";
import { DEFAULT_MAX_CONNECTED_PEERS } from "../../net/connected-peers.js";
import { DEFAULT_METRIC_PEERS } from "../metric-peers.js";
import { MAX_CPU_LATENCY_US } from "../runtime/cpu-latency-qos.js";
import { DEFAULT_MAX_PEER_TOKENIZING, DEFAULT_TOKENIZE_TIMEOUT_MS } from "../runtime/engine-steps.js";
import { PEER_FAULTS } from "../runtime/peer-fault-double.js";
import { setting } from "./doc.js";
import { num } from "./values.js";

export const limitsSettings = {
  injectDelayMs: setting(num(0, 60_000).default(0), {
    section: "Experiments",
    value: "ms",
    description: "Delay added to every peer message, in ms (experiments: emulate a slower network).",
  }),
  injectJitterMs: setting(num(0, 60_000).default(0), {
    section: "Experiments",
    value: "ms",
    description: "Plus a uniform random jitter up to this, in ms.",
  }),
  testPeerFault: setting(z.enum(PEER_FAULTS).optional(), {
    section: "Experiments",
    value: "fault",
    defaultText: "none",
    description:
      "Test double for multi-process fault tests, never for serving: this node mistreats the forwards its " +
      "peers send it (`stall`: acks and never answers; `refuse`: answers 503; `lie`: answers wrong text) " +
      "while serving its own clients normally.",
  }),
  maxTokensDefault: setting(num(1, 1_000_000, true).default(16), {
    section: "Limits",
    value: "n",
    description:
      "max_tokens of a completion request that gives none (OpenAI's default, 16), capped by the room the " +
      "prompt leaves in the context.",
  }),
  chatMaxTokensDefault: setting(num(1, 1_000_000, true).default(512), {
    section: "Limits",
    value: "n",
    description:
      "max_tokens (max_completion_tokens) of a chat request that gives none, capped by the room the prompt " +
      "leaves in the context: a request without a limit must not hold an engine slot until the context fills.",
  }),
  maxTokensCeiling: setting(num(1, 1_000_000, true).default(4096), {
    section: "Limits",
    value: "n",
    description:
      "Largest max_tokens a chat or completion request may ask for; above it the API answers 400 (one " +
      "request must not hold an engine slot for minutes while its peers idle). A peer's forward above it is " +
      "refused too (retryable: its entry node serves it elsewhere and sends this node no more such requests).",
  }),
  maxWaitMs: setting(num(0, 3_600_000).default(0), {
    section: "Limits",
    value: "ms",
    description:
      "Admission by expected wait: a client request expected to wait longer than this here (each queued " +
      "request priced from the measured costs) goes to a peer expected to start it in time, else gets 429 at " +
      "once with Retry-After the time this node's queue needs to drain back under the bound. The bound runs " +
      "from admission and holds for forwards too: they carry what is left and a peer refuses one it cannot " +
      "start in time (or within its own bound). 0 = off (only --max-pending refuses); e.g. 10000.",
  }),
  maxPending: setting(num(1, 100_000, true).default(256), {
    section: "Limits",
    value: "n",
    description:
      "Client requests admitted at once, counted from their arrival: those still being templated or " +
      "tokenized (a `/tokenize` too) with those queued, running or forwarded, and the template or " +
      "tokenize steps past `--tokenize-timeout-ms` (or whose client hung up: the engine's call is then " +
      "aborted too) that the engine still runs (peers' forwards have their " +
      "own bound, `--max-peer-tokenizing`); beyond it the API answers 429 before tokenizing the prompt.",
  }),
  tokenizeTimeoutMs: setting(num(10, 3_600_000, true).default(DEFAULT_TOKENIZE_TIMEOUT_MS), {
    section: "Limits",
    value: "ms",
    description:
      "Longest a client request's chat template, and its tokenize, may take at the engine, in ms; " +
      "past it the client gets 504 at once and the engine's call is aborted (a remote server's /tokenize " +
      "request is cancelled, not left to the engine's own HTTP timeouts); until that call has ended it " +
      "counts against `--max-pending`, so a burst cannot open calls to a hung engine without bound. A " +
      "peer's forward tokenized again here (mixed models) is bounded alike: past it its origin is " +
      "answered with an error and falls back.",
  }),
  maxPeerTokenizing: setting(num(1, 100_000, true).default(DEFAULT_MAX_PEER_TOKENIZING), {
    section: "Limits",
    value: "n",
    description:
      "Peers' forwards tokenized again here at once (mixed models: another model's tokens), the steps " +
      "past `--tokenize-timeout-ms` the engine still runs included; beyond it a forward is refused as " +
      "busy and its origin falls back. Counted apart from `--max-pending`, so peers cannot take the " +
      "places of this node's own clients.",
  }),
  maxConnections: setting(num(1, 1_000_000, true).default(1024), {
    section: "Limits",
    value: "n",
    description:
      "Client connections open at once on the API port (idle keep-alives count); beyond it a connection " +
      "gets 503 and is closed.",
  }),
  maxConnectionsPerAddress: setting(num(1, 1_000_000, true).optional(), {
    section: "Limits",
    value: "n",
    defaultText: "an eighth of `--max-connections` (at least 1)",
    description:
      "Of the API port's connections, those open at once from one client address (an IPv6 client counts " +
      "by its /64, an IPv4-mapped address as the IPv4 one); beyond it a connection gets 429 and is closed, " +
      "so one client cannot lock the others out. Raise it for a proxy or load balancer that carries many " +
      "clients on its own address.",
  }),
  maxPeerConnectionsPerAddress: setting(num(1, 100_000, true).default(64), {
    section: "Limits",
    value: "n",
    description:
      "Peer port connections open at once from one address that have not yet carried a member's " +
      "authenticated request (a member's connections then count only against the port's total, which " +
      "allows every peer its pool and forward channels, however many share a NAT address).",
  }),
  maxConnectedPeers: setting(num(1, 4096, true).default(DEFAULT_MAX_CONNECTED_PEERS), {
    section: "Limits",
    value: "n",
    description:
      "Peers this node keeps connections to at once (its pools and forward channels); past it the least " +
      "recently used peer's are closed, and the next message to it reconnects. A peer with a forward " +
      "open on its channel stays connected while it is (and is closed at a later use past the bound), so " +
      "the count can exceed this by those. A node of a large mesh talks to every member now and then: " +
      "this keeps its sockets from growing with the mesh.",
  }),
  connectionIdleTimeoutMs: setting(num(100, 3_600_000, true).default(10_000), {
    section: "Limits",
    value: "ms",
    description: "Both ports: a connection that has sent nothing at all is closed after this, in ms.",
  }),
  headersTimeoutMs: setting(num(100, 3_600_000, true).default(20_000), {
    section: "Limits",
    value: "ms",
    description:
      "Both ports: a request's headers must be complete this long after the connection opened (or the " +
      "request started, on a kept-alive connection), in ms; else 408 and the connection is closed. Also " +
      "bounds a TLS handshake on the peer port.",
  }),
  requestTimeoutMs: setting(num(1000, 3_600_000, true).default(120_000), {
    section: "Limits",
    value: "ms",
    description:
      "Both ports: a whole request, body included, must arrive within this, in ms (at least " +
      "`--headers-timeout-ms`); else 408. The answer may take as long as it needs.",
  }),
  keepAliveTimeoutMs: setting(num(100, 3_600_000, true).default(72_000), {
    section: "Limits",
    value: "ms",
    description:
      "API port: an idle kept-alive client connection is closed after this, in ms (keep it above a load " +
      "balancer's idle timeout). The peer port keeps its own, above the peers' pools'.",
  }),
  bodyLimitBytes: setting(num(1024, 256 * 1024 * 1024, true).default(4 * 1024 * 1024), {
    section: "Limits",
    value: "bytes",
    description: "Largest client request body on the API port; a larger one gets 413.",
  }),
  maxSnapshotBytes: setting(num(1024, 1024 * 1024 * 1024, true).default(16 * 1024 * 1024), {
    section: "Limits",
    value: "bytes",
    description:
      "Largest anti-entropy snapshot accepted from a peer, as sent and as decoded; a larger one is refused. " +
      "Raise it only for very large caches (a snapshot grows with the radix tree).",
  }),
  cpuLatencyUs: setting(num(0, MAX_CPU_LATENCY_US, true).optional(), {
    section: "Operations",
    value: "µs",
    defaultText: "the machine's own",
    description:
      "Linux: hold the PM QoS CPU latency limit at this many µs while the node runs (0: idle CPUs poll " +
      "instead of halting: faster wake-ups on VMs, idle CPU time burnt). Needs write access to " +
      "/dev/cpu_dma_latency.",
  }),
  drainSec: setting(num(0, 3600).default(20), {
    section: "Operations",
    value: "s",
    description:
      "On SIGTERM, stop taking requests and let in-flight work finish for up to this many seconds; a chat " +
      "template or tokenize step still open then gets 503 and its engine call is aborted, whatever " +
      "`--tokenize-timeout-ms` says.",
  }),
  logLevel: setting(z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"), {
    section: "Operations",
    value: "level",
    description: "Log level of the node's JSON log lines (pino, on stdout).",
  }),
  metricsMaxPeers: setting(num(0, 4096, true).default(DEFAULT_METRIC_PEERS), {
    section: "Operations",
    value: "n",
    description:
      "Peers with per-peer metric series of their own (`peer`, `served_by` labels): counters label the " +
      "first this many and count the rest as `other`; per-peer gauges show this many, those not live " +
      "first; `prefixmesh_members` counts all. Bounds the series a scrape of a large mesh holds.",
  }),
  requestLogSample: setting(num(0, 1).default(1), {
    section: "Operations",
    value: "share",
    description:
      "Share of successful client requests given a `request` log line, 0 to 1 (e.g. 0.01: one in a " +
      "hundred); refusals (4xx) and failures (5xx) are always logged. Lines are at level info.",
  }),
};
