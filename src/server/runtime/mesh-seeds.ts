/**
 * `gossip: "scuttlebutt"`'s seeds: `--join host:port,…` addresses turned into (id, address) seeds for
 * SWIM, which asks each for the member list (and again whenever this node is alone). An address is
 * asked who it is with a hello (like a DNS-found one: mutual TLS holds the id to the certificate's) and
 * retried with backoff until it answers. One of another cluster, model or protocol, or one that
 * refuses our credential (401/403), is refused and logged, and asked again after a backoff that
 * doubles per refusal (core/refusals.ts): a seed fixed or upgraded is joined without a restart. A
 * seed refusing our signed timestamp (a clock off by more than the shared-secret window) is told
 * apart: one warning naming the skew, reason `clock-skew`, and a backoff that stops at 2 min. A
 * seed whose name does not resolve is retried the same way, never a start-up error: in Kubernetes a
 * pod's peers' names often do not exist yet when it starts, and the node serves alone meanwhile.
 */
import {
  CLOCK_SKEW,
  DEFAULT_RECHECK,
  type RecheckTiming,
  recheckDelayMs,
  timingFor,
} from "../../core/refusals.js";
import { skewAdvice } from "../../net/clock-skew.js";
import { checkPeerHello, DiscoveryError, type HelloExpectation } from "../../net/discovery.js";
import { MAX_SEEDS, parseSeedList } from "../../net/host-port.js";
import { probeAddresses } from "../../net/probe-addresses.js";
import { type PeerClient, TransportError } from "../../net/transport-client.js";
import { explainForeignCert } from "../../net/wrong-port.js";
import type { RuntimeLogger } from "./logger.js";
import type { MeshPeers } from "./mesh-peers.js";
import type { RecheckWaits } from "./recheck-waits.js";
import { SeedStates, UNRESOLVED } from "./seed-states.js";

export const MAX_JOIN = MAX_SEEDS;
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 2_000;
// A seed still silent is said again about once a minute: one line at start-up is easily missed, and
// a mistyped seed otherwise leaves a node alone without a word.
const WARN_FIRST = 4;
const WARN_EVERY = 30;

/** `--join` (a comma-separated string, or a YAML list) as peer URLs; throws DiscoveryError on a bad one. */
export function parseJoin(spec: string | readonly string[] | undefined, scheme: "http" | "https"): string[] {
  if (spec === undefined) return [];
  const r = parseSeedList(spec, MAX_JOIN);
  if ("error" in r) throw new DiscoveryError(`--join ${r.error}`);
  return r.seeds.map((a) => `${scheme}://${a}`);
}

export interface SeedOptions {
  client: PeerClient;
  mesh: MeshPeers;
  logger: RuntimeLogger;
  expect: Omit<HelloExpectation, "peerId">;
  isStopping(): boolean;
  /** When a refused seed is asked again (default DEFAULT_RECHECK). */
  recheck?: RecheckTiming;
  /** The waits between hellos: stopped with the node, so none outlives it (default: plain timers). */
  waits?: RecheckWaits;
}

/**
 * Resolves each seed address in the background, handing each to the mesh once it answers; what became
 * of each is in the returned states (`/cluster`'s `seeds`).
 */
export function resolveSeeds(urls: readonly string[], o: SeedOptions): SeedStates {
  const states = new SeedStates(urls);
  for (const url of urls) void resolveOne(url, o, states);
  return states;
}

async function resolveOne(url: string, o: SeedOptions, states: SeedStates): Promise<void> {
  const since = Date.now();
  const timing = o.recheck ?? DEFAULT_RECHECK;
  let refusals = 0;
  let skewSaid = false;
  for (let attempt = 0; !o.isStopping(); attempt++) {
    const seen = probeAddresses();
    let waitMs = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** attempt);
    try {
      // A certificate that names no node is no other cluster's member: said as the wrong address it is.
      const r = await o.client.probeHello(url, seen).catch(async (e: unknown) => {
        throw e instanceof TransportError ? await explainForeignCert(url, e) : e;
      });
      const check = checkPeerHello({ ...o.expect, peerId: r.certId }, r.hello);
      const id = helloId(r.hello) ?? r.certId ?? null;
      if (check.ok) {
        states.answered(url, id, "joined", seen);
        o.logger.info(
          { seed: url, peer: check.hello.id },
          refusals > 0 ? "joining through seed after re-check" : "joining through seed",
        );
        o.mesh.seed(check.hello.id, url);
        return;
      }
      // Ourselves (a seed list shared by every node) is no seed.
      if (check.reason === "self") {
        states.answered(url, id, "self", seen);
        return;
      }
      // Another cluster, model or protocol: asked again after a growing backoff (it may be fixed).
      waitMs = recheckDelayMs(timing, ++refusals);
      states.answered(url, id, check, seen, Date.now() + waitMs);
      o.logger.error(
        { seed: url, reason: check.reason, recheckInS: Math.round(waitMs / 1000) },
        `seed refused: ${check.message}`,
      );
    } catch (err) {
      if (err instanceof TransportError && err.clockSkewMs !== undefined) {
        // Our signed timestamp refused: a clock is off. Said once per seed (the fix is the operator's
        // or NTP's); asked again on the backoff, which stops doubling at CLOCK_SKEW_MAX_MS.
        waitMs = recheckDelayMs(timingFor(timing, CLOCK_SKEW), ++refusals);
        states.failed(url, err, seen, Date.now() + waitMs);
        const fields = {
          seed: url,
          skewS: Math.round(err.clockSkewMs / 1000),
          recheckInS: Math.round(waitMs / 1000),
        };
        if (!skewSaid) {
          skewSaid = true;
          o.logger.warn(fields, `seed refused our signed requests: ${skewAdvice(err.clockSkewMs, "seed")}`);
        } else o.logger.debug(fields, "seed still refuses our clock");
      } else if (
        err instanceof TransportError &&
        err.kind === "http" &&
        (err.status === 401 || err.status === 403)
      ) {
        // Our credential refused: the same backoff as a refusing hello, not a seed still starting.
        waitMs = recheckDelayMs(timing, ++refusals);
        states.failed(url, err, seen, Date.now() + waitMs);
        o.logger.error(
          { seed: url, err: err.message, recheckInS: Math.round(waitMs / 1000) },
          "seed refused our credential",
        );
      } else if (err instanceof TransportError && (err.wrongAddress || err.certRefused)) {
        // It answers, but as no peer port we can use (wrong-port.ts), or with a certificate one side
        // refuses: said at once, since waiting will not fix it, then as often as a silent seed is;
        // still asked at the same pace (it may be moved, or given the right certificate).
        states.failed(url, err, seen, Date.now() + waitMs);
        if (attempt === 0 || (attempt >= WARN_FIRST && (attempt - WARN_FIRST) % WARN_EVERY === 0)) {
          const waitedS = Math.round((Date.now() - since) / 1000);
          const what = err.certRefused
            ? "seed's TLS handshake failed on a certificate"
            : "seed address is not a peer port this node can use";
          o.logger.error(
            { seed: url, err: err.message, attempts: attempt + 1, waitedS },
            `${what}; retrying every ${RETRY_MAX_MS / 1000} s`,
          );
        }
      } else {
        states.failed(url, err as Error, seen, Date.now() + waitMs);
        if (attempt >= WARN_FIRST && (attempt - WARN_FIRST) % WARN_EVERY === 0) {
          const waitedS = Math.round((Date.now() - since) / 1000);
          const fields = { seed: url, err: (err as Error).message, attempts: attempt + 1, waitedS };
          const retry = `retrying every ${RETRY_MAX_MS / 1000} s`;
          const what = UNRESOLVED.test(fields.err)
            ? "seed's name does not resolve (yet)"
            : attempt === WARN_FIRST
              ? "seed not answering yet"
              : "seed still not answering";
          o.logger.warn(fields, `${what}; ${retry}`);
        }
      }
    }
    if (o.waits) {
      if (!(await o.waits.wait(waitMs))) return;
    } else await new Promise((res) => setTimeout(res, waitMs).unref());
  }
}

/** The id a hello names, even one we refuse (an operator wants to know who answered). */
function helloId(hello: unknown): string | null {
  const id = (hello as { id?: unknown } | null)?.id;
  return typeof id === "string" && id.length <= 64 ? id : null;
}
