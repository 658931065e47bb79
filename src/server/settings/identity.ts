/** Settings: Identity, addresses and membership: who this node is and how it finds its peers. */
import { z } from "zod";
import { DAEMON_NODE_DEFAULTS } from "../../core/node/config.js";
import { dnsTargetProblem, peerCountProblem } from "../../net/discovery.js";
import { parseSeedList } from "../../net/host-port.js";
import { nodeIdSchema } from "../../net/node-id.js";
import { setting } from "./doc.js";
import { hostPort, num } from "./values.js";

/** A bad seed is refused where it was given (flag, env or file), naming the entry. */
function joinProblem(v: string | readonly string[] | undefined, ctx: z.RefinementCtx): void {
  const r = v === undefined ? undefined : parseSeedList(v);
  if (r && "error" in r) ctx.addIssue({ code: "custom", message: r.error });
}

/** A bad `--peers-dns` is refused where it was given, before any look-up (discovery.ts). */
function peersDnsProblem(v: string | undefined, ctx: z.RefinementCtx): void {
  const bad = v === undefined ? undefined : dnsTargetProblem(v);
  if (bad !== undefined) ctx.addIssue({ code: "custom", message: `'${v}': ${bad}` });
}

/**
 * An advertised address is where peers connect: a wildcard names no host (and 0.0.0.0 reaches each
 * peer's own machine), port 0 no port.
 */
function advertiseProblem(v: string, ctx: z.RefinementCtx): void {
  const i = v.lastIndexOf(":");
  const host = v.slice(0, i).replace(/^\[|\]$/g, "");
  if (host === "0.0.0.0" || host === "::" || v.slice(i + 1) === "0")
    ctx.addIssue({
      code: "custom",
      message: `'${v}' is no address peers can reach (a wildcard host or port 0): give this machine's, e.g. 10.0.0.1:9080`,
    });
}

export const identitySettings = {
  id: setting(nodeIdSchema, {
    section: "Identity and addresses",
    value: "id",
    description:
      "This node's id, unique in the cluster. With mutual TLS it must be the id its certificate was issued for.",
  }),
  listen: setting(hostPort.default("127.0.0.1:8080"), {
    section: "Identity and addresses",
    value: "host:port",
    description:
      "Client API address: the OpenAI-compatible API, /health, /ready, /metrics, /cluster and /dashboard. " +
      "Bind 0.0.0.0:PORT to serve other machines.",
  }),
  peerListen: setting(hostPort.default("127.0.0.1:9080"), {
    section: "Identity and addresses",
    value: "host:port",
    description:
      "Peer port address: anti-entropy snapshots and forwarded requests from the other nodes, authenticated " +
      "(mutual TLS or shared secret). Other nodes must reach it.",
  }),
  advertise: setting(hostPort.superRefine(advertiseProblem).optional(), {
    section: "Identity and addresses",
    value: "host:port",
    defaultText: "--peer-listen",
    description:
      "The peer-port address other nodes reach this one at, when it is not --peer-listen's (behind NAT, in a " +
      "container): with --gossip scuttlebutt it rides every membership message. Default: --peer-listen's " +
      "address; for a wildcard host (0.0.0.0, ::) this machine's first non-loopback IPv4 address. " +
      "A wildcard or port 0 here is refused: peers could not reach it.",
  }),
  peers: setting(
    z
      .union([z.string().max(65536), z.array(z.unknown()), z.record(z.string(), z.string())])
      .optional()
      .superRefine((v, ctx) => {
        const problem = peerCountProblem(v);
        if (problem) ctx.addIssue({ code: "custom", message: problem });
      }),
    {
      section: "Membership",
      value: "list",
      description:
        "Static peers, each an id and its peer-port URL: `B=https://10.0.0.2:9080,C=https://10.0.0.3:9080` " +
        "(https with --tls-dir, http otherwise). In YAML also a list of `{id, url}` or of `ID=URL`, " +
        "or a map id → url. " +
        "With --gossip scuttlebutt (the default) they are seeds; with --gossip full, the membership.",
    },
  ),
  peersDns: setting(z.string().max(300).optional().superRefine(peersDnsProblem), {
    section: "Membership",
    value: "name[:port]",
    description:
      "Peers from DNS: every A/AAAA record of the name is a peer (e.g. a Kubernetes headless Service); " +
      "each is asked its id with a hello before it joins. Port: this node's own peer port. With --gossip " +
      "scuttlebutt (the default) they are seeds, and an address leaving DNS does not remove a live member; " +
      "with --gossip full, they are the membership and an address leaving DNS removes its peer.",
  }),
  peersDnsIntervalMs: setting(num(100, 3_600_000, true).default(10_000), {
    section: "Membership",
    value: "ms",
    description: "How often the --peers-dns name is re-resolved and DNS-found peers re-checked, in ms.",
  }),
  peersDnsFile: setting(z.string().min(1).max(4096).optional(), {
    section: "Membership",
    value: "file",
    description:
      'Answer --peers-dns look-ups from this JSON file (`{"name": ["10.0.0.7", …]}`), re-read each round, ' +
      "instead of DNS: for tests and for environments that publish peer addresses as a file.",
  }),
  gossip: setting(z.enum(["full", "scuttlebutt"]).default(DAEMON_NODE_DEFAULTS.gossip), {
    section: "Membership",
    value: "mode",
    description:
      "How the mesh keeps membership and estimates. `scuttlebutt` (the default): SWIM membership (join " +
      "through seeds — --join, static --peers and --peers-dns addresses — members learned by gossip and " +
      "verified by their credential; a dead or departed member is shown down while remembered) and digest " +
      "anti-entropy with 3 members per Δpoll. `full`: the paper's full mesh (every Δpoll a snapshot to " +
      "every peer; every member configured or found by DNS, and removed when it leaves DNS). Every node of " +
      "a cluster must run the same mode.",
  }),
  join: setting(
    z
      .union([z.string().max(65536), z.array(z.string().max(300)).max(256)])
      .optional()
      .superRefine(joinProblem),
    {
      section: "Membership",
      value: "host:port,…",
      description:
        "With --gossip scuttlebutt: seeds to join through, peer-port addresses of any current members " +
        "(each is asked its id with a hello). Host names may hold `_` (Docker's container names, e.g. " +
        "`proj_node_1:9080`); IPv6 in brackets. Static --peers and --peers-dns addresses are seeds too. " +
        "`/cluster` shows what became of each seed (`seeds`).",
    },
  ),
  maxEstimates: setting(num(1, 4095, true).optional(), {
    section: "Membership",
    value: "n",
    defaultText: "--max-peers",
    description:
      "With --gossip scuttlebutt: keep estimates of at most this many members (the most useful for this " +
      "node's traffic, plus newcomers now and then); a node forwards only to members it holds one of.",
  }),
  maxPeers: setting(num(1, 256, true).default(256), {
    section: "Membership",
    value: "n",
    description:
      "Most peers at once, static and DNS-found together; DNS-found ones beyond it are refused. With " +
      "--gossip scuttlebutt: estimates held at most when --max-estimates is unset; a mesh larger than " +
      "this finds the owners it holds no estimate of by cache summaries and hints, as under --max-estimates.",
  }),
};
