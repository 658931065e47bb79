/**
 * Assembles one node process: engine, PrefixNode, peer transport (client pools + peer server), client
 * API, metrics and logging, from validated settings. Returns a handle whose `stop()` is the graceful
 * SIGTERM path.
 */
import type { FastifyInstance } from "fastify";
import pino, { type Logger } from "pino";
import type { Engine } from "../../core/engine.js";
import type { NodeConfig } from "../../core/node/config.js";
import { PrefixNode } from "../../core/node/node.js";
import { POLICY_NAMES } from "../../core/node/policies/index.js";
import { DEFAULT_RECHECK, type RecheckTiming } from "../../core/refusals.js";
import { limitConnections } from "../../net/connection-limit.js";
import { applyConnectionTimeouts } from "../../net/connection-timeouts.js";
import { createDelayInjector } from "../../net/delay.js";
import {
  DiscoveryError,
  parseDnsTarget,
  parsePeerList,
  parseStaticPeers,
  type StaticPeer,
  systemResolver,
} from "../../net/discovery.js";
import { FORWARD_TIMEOUT_MARGIN_MS } from "../../net/forward-timeouts.js";
import { trackOwedAnswers } from "../../net/owed-answers.js";
import { PeerClient } from "../../net/transport-client.js";
import { buildPeerServer, peerPortConnectionLimit } from "../../net/transport-server.js";
import { buildApi } from "../api.js";
import { createMetrics } from "../metrics.js";
import { errorBody } from "../openai/format.js";
import { type NodeSettings, SettingsError, splitHostPort } from "../settings/index.js";
import { advertisedPeerUrl } from "./advertise.js";
import { bindHost } from "./bind-host.js";
import { engineKvEventsStatus } from "./cache-predictions.js";
import { calibrateAtStart } from "./calibration.js";
import { ANSWER_GRACE_MS, closeWithGrace } from "./close-grace.js";
import { holdCpuLatency } from "./cpu-latency-qos.js";
import { daemonNodeConfig } from "./daemon-node-config.js";
import { DnsMembership, fileResolver } from "./dns-membership.js";
import { loadEngine } from "./engine-loader.js";
import { bound } from "./listen-error.js";
import { resolveSeeds } from "./mesh-seeds.js";
import { NodeRuntime } from "./node-runtime.js";
import { peerFaultDouble } from "./peer-fault-double.js";
import { peerSecurity } from "./peer-security.js";
import { holdPorts } from "./port-hold.js";
import { RecheckWaits } from "./recheck-waits.js";
import { StaticPeerChecks } from "./static-peer-checks.js";

export interface NodeHandle {
  runtime: NodeRuntime;
  /** The settings it was started from (a restart under the same id reuses them). */
  settings: NodeSettings;
  /** The node's configuration as resolved (defaults filled). */
  nodeConfig: NodeConfig;
  apiUrl: string;
  peerUrl: string;
  logger: Logger;
  stop(): Promise<void>;
}

function staticPeersOf(s: NodeSettings): StaticPeer[] {
  if (s.peers === undefined) return [];
  if (typeof s.peers === "string") return parseStaticPeers(s.peers, { self: s.id });
  return parsePeerList(s.peers, { self: s.id });
}

/** The API port's share per client address when not set: a small fraction of the total. */
export const API_CONNECTIONS_PER_ADDRESS_FRACTION = 1 / 8;

/** `--max-connections-per-address`, or its default from `--max-connections`. */
export function apiConnectionsPerAddress(s: NodeSettings): number {
  return (
    s.maxConnectionsPerAddress ??
    Math.max(1, Math.floor(s.maxConnections * API_CONNECTIONS_PER_ADDRESS_FRACTION))
  );
}

/**
 * A forward's answer stream the node never answers is closed after this many forward timeouts: by
 * then its origin has long moved on (and a slow answer had time to come).
 */
export const FORWARD_STREAM_TTL_FACTOR = 4;

export async function startNode(
  s: NodeSettings,
  opts: {
    logger?: Logger;
    engine?: Engine;
    /** When refused peers, seeds and members are asked again (tests shorten it; core/refusals.ts). */
    recheck?: Partial<RecheckTiming>;
    /** Shared-secret mode: the clock peer requests are signed and checked by (tests skew it; default Date.now). */
    authClock?: () => number;
  } = {},
): Promise<NodeHandle> {
  const logger = opts.logger ?? pino({ level: s.logLevel, base: { node: s.id } });
  const peers = staticPeersOf(s);
  const pl = splitHostPort(s.peerListen);
  // Validated before anything starts: a bad name is a usage error.
  const dnsTarget = s.peersDns ? parseDnsTarget(s.peersDns, pl.port) : undefined;
  if (peers.length > s.maxPeers) {
    throw new DiscoveryError(`${peers.length} static peers exceed --max-peers ${s.maxPeers}`);
  }
  const { tls, join, mode, admitsNone, auth } = await peerSecurity(s, peers, logger, opts.authClock);
  if (s.testPeerFault) logger.warn({ fault: s.testPeerFault }, "TEST DOUBLE: peers' forwards mistreated");
  const clusterId = tls?.clusterId ?? s.clusterId ?? "prefixmesh";

  // The embedded engine cannot run LoRA adapters: claiming to serve them would run the base model.
  if (s.adapters && s.engine === "llamacpp" && !opts.engine)
    throw new SettingsError(
      "--adapters needs --engine openai (a server started with those LoRA adapters) or sim",
    );
  // Held through the engine load, which can take minutes: a port clash is found at once, and no other
  // process takes a port meanwhile.
  const ports = await holdPorts(
    [
      { flag: "--peer-listen", address: s.peerListen, role: "peer" },
      { flag: "--listen", address: s.listen, role: "api" },
    ],
    s.id,
  );
  // Held before the engine loads: a limit that cannot be set is a configuration error, found early.
  let cpuLatency: ReturnType<typeof holdCpuLatency> | undefined;
  const adapters = s.adapters ? s.adapters.split(",") : [];
  let engine: Engine;
  try {
    cpuLatency = s.cpuLatencyUs === undefined ? undefined : holdCpuLatency(s.cpuLatencyUs);
    engine = opts.engine ?? (await loadEngine(s, (msg, fields) => logger.warn(fields, msg)));
  } catch (err) {
    cpuLatency?.release();
    throw err;
  } finally {
    // Let go here, not at the bind: nothing below awaits before the servers bind, and a start that
    // fails in between must not keep the ports.
    await ports.release();
  }
  const now = () => performance.timeOrigin + performance.now();
  const node = new PrefixNode(
    daemonNodeConfig(s, {
      recheck: recheckTiming(opts.recheck),
      peers: peers.map((p) => p.id),
      dynamicPeers: dnsTarget !== undefined,
      engine: engine.info,
      models: [engine.info.model, ...adapters],
    }),
    { now, random: Math.random },
    // Epochs order incarnations across restarts: wall-clock ms at start.
    { epoch: Date.now() },
  );

  const metrics = createMetrics(s.id, {
    maxPeerSeries: s.metricsMaxPeers,
    kvEvents: engineKvEventsStatus(engine) !== undefined,
    tlsNotAfter: tls?.notAfterMs,
  });
  const delay = createDelayInjector({ delayMs: s.injectDelayMs, jitterMs: s.injectJitterMs });
  const delayFn = delay.enabled ? () => delay.wait() : undefined;
  const client = new PeerClient({
    auth,
    // The node's own forward timer decides fallbacks; transport timeouts are a backstop behind it
    // (each forward widens them to its own wait: net/forward-timeouts.ts).
    timeouts: {
      firstByteMs: s.forwardTimeoutMs + FORWARD_TIMEOUT_MARGIN_MS,
      gapMs: s.forwardTimeoutMs + FORWARD_TIMEOUT_MARGIN_MS,
      forwardTotalMs: Math.max(s.forwardTimeoutMs * 2, 10_000),
    },
    forwardTransport: s.forwardTransport,
    maxConnectedPeers: s.maxConnectedPeers,
    ...(delayFn ? { delay: delayFn } : {}),
  });
  metrics.setConnectedPeers(() => client.connectedPeers);
  const peerUrls = new Map(peers.map((p) => [p.id, p.url]));
  for (const p of peers) client.setPeer(p.id, p.url);

  const runtime = new NodeRuntime({
    node,
    engine,
    client,
    metrics,
    logger,
    clusterId,
    peerUrls,
    maxPending: s.maxPending,
    tokenizeTimeoutMs: s.tokenizeTimeoutMs,
    maxPeerTokenizing: s.maxPeerTokenizing,
    maxTokensCeiling: s.maxTokensCeiling,
    adapters,
    forwardStreamTtlMs: s.forwardTimeoutMs * FORWARD_STREAM_TTL_FACTOR,
    policies: POLICY_NAMES,
    now,
    ...(cpuLatency ? { cpuLatencyUs: cpuLatency.requestedUs } : {}),
    mesh: {
      helloModel: s.mixedModels ? undefined : engine.info.model,
      maxMessageBytes: s.maxSnapshotBytes,
      admitsNone,
    },
  });
  const timeouts = {
    idleMs: s.connectionIdleTimeoutMs,
    headersMs: s.headersTimeoutMs,
    requestMs: s.requestTimeoutMs,
  };
  const peerServer = buildPeerServer({
    auth,
    handlers: s.testPeerFault
      ? peerFaultDouble(s.testPeerFault, runtime.peerHandlers())
      : runtime.peerHandlers(),
    maxSnapshotBytes: s.maxSnapshotBytes,
    ...(delayFn ? { delay: delayFn } : {}),
    logger,
    // Peers: a pool and forward channels each, plus DNS probes and reconnects in flight.
    connections: {
      limits: { max: peerPortConnectionLimit(s.maxPeers), perAddress: s.maxPeerConnectionsPerAddress },
      timeouts,
    },
    onConnectionClosed: (reason) => metrics.connectionsRefused.inc({ port: "peer", reason }),
  });
  const api = buildApi({
    service: runtime,
    metrics,
    logger,
    bodyLimit: s.bodyLimitBytes,
    defaultMaxTokens: s.maxTokensDefault,
    chatDefaultMaxTokens: s.chatMaxTokensDefault,
    maxTokensCeiling: s.maxTokensCeiling,
    requestLogSample: s.requestLogSample,
  });
  const apiClosed = (reason: string) => metrics.connectionsRefused.inc({ port: "api", reason });
  const watchApiIdle = applyConnectionTimeouts(
    api.server,
    { ...timeouts, keepAliveMs: s.keepAliveTimeoutMs },
    apiClosed,
  );
  const apiAnswers = trackOwedAnswers(api.server);
  limitConnections(
    api.server,
    { max: s.maxConnections, perAddress: apiConnectionsPerAddress(s) },
    {
      onRefused: apiClosed,
      onAdmitted: (socket) => {
        watchApiIdle(socket);
        apiAnswers.admit(socket);
      },
      body: (message) => errorBody(message, "server_error", null, "too_many_connections"),
    },
  );

  const al = splitHostPort(s.listen);
  let peerUrl: string;
  let apiUrl: string;
  try {
    const listenOn = (server: typeof api, at: { host: string; port: number }) =>
      bindHost(at.host).then((host) => server.listen({ host, port: at.port }));
    peerUrl = await bound("--peer-listen", s.peerListen, listenOn(peerServer, pl));
    apiUrl = await bound("--listen", s.listen, listenOn(api, al));
  } catch (err) {
    await Promise.allSettled([peerServer.close(), api.close(), engine.close(), client.close()]);
    cpuLatency?.release();
    throw err;
  }
  await calibrateAtStart(engine, node, s.calibrationMs, logger);
  const mesh = runtime.mesh;
  if (mesh) {
    // Members reach us at the address we carry on every mesh message (advertise.ts).
    const self = advertisedPeerUrl(peerUrl, s.advertise);
    if (self.source === "wildcard")
      logger.warn(
        { peer: peerUrl },
        "--gossip scuttlebutt: a wildcard --peer-listen is not an address peers can reach; set --advertise",
      );
    else if (self.source === "interface")
      logger.info({ peer: self.url }, "advertising this machine's address for the wildcard --peer-listen");
    mesh.selfUrl = self.url;
    for (const p of peers) mesh.learn(p.id, p.url, true);
  }
  runtime.start();
  logger.info(
    {
      api: apiUrl,
      peer: peerUrl,
      peers: peers.map((p) => `${p.id}=${p.url}`),
      mode,
      engine: engine.info,
      policy: s.policy,
      ...(cpuLatency ? { cpuLatencyUs: cpuLatency.requestedUs } : {}),
    },
    "node started",
  );
  // With --mixed-models a peer of any model is admitted: requests route by the models hellos advertise.
  const helloModel = s.mixedModels ? undefined : engine.info.model;
  // SWIM verifies its members itself (mesh-peers.ts); the full mesh checks its static peers here.
  const expect = { cluster: clusterId, model: helloModel, self: s.id, authMode: auth.mode, gossip: s.gossip };
  const timing = recheckTiming(opts.recheck);
  // Refused peers and seeds wait minutes between hellos: stop() ends those waits with the node.
  const waits = new RecheckWaits();
  let checks: StaticPeerChecks | undefined;
  if (!mesh) {
    checks = new StaticPeerChecks(peers, { client, runtime, logger, expect, now, timing, waits });
    runtime.view.setRefused(() => checks?.view() ?? []);
    void checks.start();
  }
  if (mesh) {
    const seeds = resolveSeeds(join, {
      client,
      mesh,
      logger,
      expect,
      isStopping: () => runtime.isStopping,
      recheck: timing,
      waits,
    });
    runtime.view.setSeeds(() => seeds.view());
  }
  let dns: DnsMembership | undefined;
  if (dnsTarget) {
    const staticIds = new Set(peers.map((p) => p.id));
    dns = new DnsMembership({
      target: dnsTarget,
      scheme: tls ? "https" : "http",
      resolver: s.peersDnsFile ? fileResolver(s.peersDnsFile) : systemResolver(),
      intervalMs: s.peersDnsIntervalMs,
      expect,
      ports: {
        probeHello: (url) => client.probeHello(url),
        hello: (id, url) => client.hello(id, url),
        // Under SWIM every answering address is a seed of its id, never a spare of another address.
        hasPeer: (id) => !mesh && runtime.admin.hasPeer(id),
        isStatic: (id) => staticIds.has(id),
        // Under SWIM a DNS-found node is a seed: SWIM admits it (verified) and decides when it is gone.
        addPeer: (id, url, hello) => {
          if (!mesh) return runtime.addPeer(id, url, hello);
          mesh.seed(id, url);
          return true;
        },
        // Under SWIM, a member's (kept should it come back unverified), never a non-member's.
        noteHello: (id, hello) => (mesh ? mesh.noteHello(id, hello) : runtime.admin.notePeerHello(id, hello)),
        movePeer: (id, url) => (mesh ? mesh.learn(id, url, true) : runtime.admin.movePeer(id, url)),
        removePeer: (id, why) => (mesh ? undefined : runtime.removePeer(id, why)),
      },
      logger,
    });
    runtime.view.setDiscovery(() => dns?.view());
    // Not awaited: peers that are not up yet are found on later rounds; startup does not wait for DNS.
    dns.start().catch((err: Error) => logger.error({ err: err.message }, "peer discovery failed to start"));
    logger.info(
      { name: dnsTarget.host, port: dnsTarget.port, maxPeers: s.maxPeers },
      "peer discovery by DNS",
    );
  }

  // A restart a peer's snapshot shows is checked at once: static peers here, DNS-found ones there
  // (under SWIM a restart is SWIM's news, verified there).
  if (!mesh)
    runtime.watchPeerEpochs((id, epoch) => {
      checks?.sawEpoch(id, epoch);
      dns?.sawEpoch(id, epoch);
    });

  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      logger.info({}, "shutting down: refusing new requests, draining in-flight work");
      dns?.stop();
      waits.stop();
      const apiClosed = closeQuietly(api);
      await runtime.shutdown(s.drainSec * 1000);
      // The drain is over: what the engine still has in flight (a stalled server's) ends now, and
      // the clients waiting on it get their 503 within the answer grace.
      const engineClosed = engine.close().catch(() => {});
      await closeWithGrace(api.server, apiClosed, ANSWER_GRACE_MS, apiAnswers);
      const peerClosed = closeQuietly(peerServer);
      peerServer.server.closeAllConnections();
      await peerClosed;
      await client.close();
      await engineClosed;
      cpuLatency?.release();
      logger.info({}, "stopped");
    })();
    return stopping;
  };
  return { runtime, settings: s, nodeConfig: node.config, apiUrl, peerUrl, logger, stop };
}

async function closeQuietly(app: FastifyInstance): Promise<void> {
  await app.close().catch(() => {});
}

/** The re-check backoff: the defaults under what a caller (a test) set. */
function recheckTiming(t: Partial<RecheckTiming> | undefined): RecheckTiming {
  return { ...DEFAULT_RECHECK, ...t };
}
