/** Settings: Routing, forwarding and peer security. */
import { z } from "zod";
import { DAEMON_NODE_DEFAULTS } from "../../core/node/config.js";
import { POLICY_NAMES } from "../../core/node/policies/index.js";
import { DEFAULT_POLICY } from "../default-policy.js";
import { setting } from "./doc.js";
import { bool, nodeConfigNumber, nodeNum, num } from "./values.js";

export const routingSettings = {
  policy: setting(z.enum(POLICY_NAMES).default(DEFAULT_POLICY), {
    section: "Routing and forwarding",
    value: "name",
    description:
      "Routing policy. `cost-aware` forwards only when the prefill a peer saves exceeds the round trip and " +
      "its queue; `affinity` is the paper's Algorithm 1 (longest estimated prefix match, ties to self); " +
      "`local` never forwards; `round-robin`, `random`, `least-loaded` and `affinity-argmax` are baselines.",
  }),
  pollMs: setting(num(1, 3_600_000).default(500), {
    section: "Routing and forwarding",
    value: "ms",
    description:
      "Δpoll, the anti-entropy period: every Δpoll a node exchanges digests with 3 members (--gossip " +
      "scuttlebutt, the default) or sends its snapshot to every peer (--gossip full, where it is also the " +
      "heartbeat: a peer silent for 3 periods is suspected). Lower: fresher estimates, more gossip.",
  }),
  advertiseCosts: setting(bool.default(DAEMON_NODE_DEFAULTS.advertiseCosts), {
    section: "Routing and forwarding",
    value: "bool",
    description:
      "Put this node's measured engine costs (calibrated at start-up, refined by every run) in its snapshot " +
      "header, and weigh each peer by the costs it advertises: a peer 3× slower gets a request only when " +
      "its cache saves more than that. A node of an older build refuses such snapshots: set false until " +
      "every node of the mesh is upgraded.",
  }),
  downAfterPolls: setting(nodeNum("downAfterPolls"), {
    section: "Routing and forwarding",
    value: "n",
    description:
      "A peer silent for this many Δpoll is shown down, not just suspected (a crash sends no goodbye). " +
      "Routing avoids suspected and down peers alike; this bounds how long a dead peer reads as suspected " +
      "on /cluster, the metrics and the dashboard. Must exceed the suspect bound (3 polls).",
  }),
  clusterId: setting(
    z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/, "a cluster id is 1-64 characters from A-Z a-z 0-9 _ . -")
      .optional(),
    {
      section: "Peer security",
      value: "id",
      defaultText: "`prefixmesh` (mutual TLS: the CA's)",
      description:
        "The cluster's name, checked in every peer hello: nodes of another cluster are refused. With mutual " +
        "TLS it is read from the cluster CA and this setting is not used.",
    },
  ),
  tlsDir: setting(z.string().min(1).max(4096).optional(), {
    section: "Peer security",
    value: "dir",
    description:
      "Mutual TLS: a directory holding `ca.crt` and this node's `node-<id>.crt` and `node-<id>.key` " +
      "(`prefixmesh certs init`, then `certs issue --id <id>`). Peers are then `https://` URLs.",
  }),
  secretFile: setting(z.string().min(1).max(4096).optional(), {
    section: "Peer security",
    value: "file",
    description:
      "Shared-secret mode: peer messages are signed with HMAC-SHA256 under this file's secret " +
      "(`prefixmesh certs secret --out FILE`), the same file on every node. For trusted LANs: not encrypted. " +
      "Not with --tls-dir (a node uses one of the two).",
  }),
  insecure: setting(bool.default(false), {
    section: "Peer security",
    description:
      "Allow unauthenticated peer traffic. A node with peers and neither --tls-dir nor --secret-file refuses " +
      "to start without it. Trusted networks only.",
  }),
  concurrency: setting(nodeNum("concurrency"), {
    section: "Routing and forwarding",
    value: "n",
    description: "Requests the engine runs at once; 1 is the paper's batching-free setting.",
  }),
  forwardTimeoutMs: setting(nodeNum("forwardTimeoutMs"), {
    section: "Routing and forwarding",
    value: "ms",
    description:
      "Give up on a forward attempt after this long, in ms (longer for a request whose own run needs more: " +
      "3 × its expected run + 1 s); the request then goes to the next-best node, finally this one.",
  }),
  forwardAckTimeoutMs: setting(nodeNum("forwardAckTimeoutMs"), {
    section: "Routing and forwarding",
    value: "ms",
    description:
      "Fall back when a forward is not acknowledged in max(this, 4 × the peer's RTT), in ms. Over TCP " +
      "nothing is lost silently, so the ack only guards against a frozen or black-holed peer; too low, and a " +
      "busy machine's slow acks become spurious fallbacks (work done twice).",
  }),
  offload: setting(bool.default(DAEMON_NODE_DEFAULTS.offload), {
    section: "Routing and forwarding",
    value: "bool",
    description:
      "Offload: this node's own wait is judged by how long its running requests have run (one far past the " +
      "usual service time, e.g. an unbounded generation, is expected to run as long again), so new work " +
      "goes to a peer that will finish it sooner, and every Δpoll its clients' requests still queued here " +
      "move to such a peer (each move counted in that peer's wait at once). A peer's wait then counts at " +
      "most one of its service times above its own estimate when our queue is longer, not our whole wait.",
  }),
  recentPrefixMs: setting(nodeNum("recentPrefixMs"), {
    section: "Routing and forwarding",
    value: "ms",
    description:
      "A prompt queued here, or forwarded by this node, counts as cached at the node it went to for this " +
      "long (renewed by each later prompt of the prefix): a second request for a prefix still queued or " +
      "running follows the first instead of computing it cold elsewhere. Local only, nothing on the wire. " +
      "0 = off (the paper's node).",
  }),
  spotCheckRate: setting(nodeConfigNumber("spotCheckRate").default(0), {
    section: "Routing and forwarding",
    value: "share",
    description:
      "Spot checks: this share (0 to 1) of peers' answers to deterministic requests (temperature 0, no " +
      "presence or frequency penalty) is recomputed here when the node is idle; a peer whose answer's " +
      "first 64 characters differ is quarantined (never routed to again and its answers refused, until " +
      "this node restarts or its cache is reset with POST /admin/reset-cache) and shown on /cluster. 0 = off.",
  }),
  forwardTransport: setting(z.enum(["channel", "http"]).default("channel"), {
    section: "Routing and forwarding",
    value: "kind",
    description:
      "How forwards travel: `channel`, multiplexed on one WebSocket per peer upgraded on the peer port; " +
      "`http`, one HTTP request per forward.",
  }),
};
