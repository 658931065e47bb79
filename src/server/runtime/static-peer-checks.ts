/**
 * The full mesh's check of its static peers (`--peers`): each is asked who it is (GET /peer/hello),
 * retried while it starts. One that announces another id, cluster, model or no common protocol, or
 * proves it lacks the cluster's credential, is refused: nothing is sent to it and nothing it sends is
 * accepted (transport-rules.ts, [Refused peers]). A refusal is not for good: the peer is asked again
 * after a backoff that doubles per refusal (core/refusals.ts), with a fresh hello through the same
 * check, and admitted once it passes, so a peer fixed or upgraded joins without restarting this node.
 * A peer that stays wrong costs one hello per backoff period. A peer seen back in a newer epoch (its
 * snapshot says so: it restarted, perhaps with another engine, cache or adapters) is asked again too,
 * so what its hello said is not kept from its last life. (Gossip "scuttlebutt" verifies members
 * itself: mesh-verify.ts, and re-reads a restarted one's hello: member-hellos.ts.)
 *
 * A peer that does not answer its hello (down, starting, timing out, failing) is asked again on
 * a backoff of its own, 1 s doubling to UNANSWERED_BACKOFF's 30 s ceiling (the same doubling
 * as refusals', core/refusals.ts), counted across checks, so one that gossips (looks up) but never
 * answers costs one hello per 30 s, not one a second, and is still asked for as long as it gossips:
 * it may come right. It is not verified meanwhile. After MAX_UNANSWERED hellos in a row unanswered
 * the check gives up (a peer gone for good costs nothing); the peer's snapshots start it again, but
 * only once its backoff has run out. An answer (a pass or a refusal) ends the backoff; so does the
 * peer's first snapshot or a newer epoch (it is up now, or restarted: a running check's wait is cut
 * short), at most once per backoff ceiling, since any peer can claim a new epoch in every snapshot.
 * The log says so once per streak, as the backoff reaches its ceiling (each step before: debug).
 */
import {
  CLOCK_SKEW,
  DEFAULT_RECHECK,
  type RecheckTiming,
  Refusals,
  type RefusedView,
  recheckDelayMs,
  refusedView,
  timingFor,
} from "../../core/refusals.js";
import { skewAdvice } from "../../net/clock-skew.js";
import { checkPeerHello, type HelloExpectation, type StaticPeer } from "../../net/discovery.js";
import { type PeerClient, TransportError } from "../../net/transport-client.js";
import type { RuntimeLogger } from "./logger.js";
import type { NodeRuntime } from "./node-runtime.js";
import { definiteRefusal, refusedNow } from "./peer-refusal.js";
import { RecheckWaits } from "./recheck-waits.js";

/**
 * The backoff between unanswered hellos (recheckDelayMs' doubling): a peer still starting is asked
 * each second at first; the ceiling keeps one that never answers to one hello per 30 s, within which a
 * peer that comes right is admitted (as soon as a refused one is first asked again, RECHECK_FIRST_MS).
 */
// afterChangeMs is not read here: a restart's evidence is weighed in endBackoff.
const UNANSWERED_BACKOFF: RecheckTiming = { firstMs: 1_000, maxMs: 30_000, afterChangeMs: 1_000 };
/** No peer is asked more often than this, whatever its snapshots say. */
const UNANSWERED_RETRY_MS = UNANSWERED_BACKOFF.firstMs;
/**
 * Unanswered hellos in a row before a check gives up (about 10 min of the backoff), so a peer gone for
 * good is left alone; its snapshots, if it sends any, start the check again once its backoff ran out.
 */
const MAX_UNANSWERED = 24;

/** A static peer whose hellos go unanswered (one entry per static peer at most). */
interface Unanswered {
  /** Unanswered hellos in a row, across checks: the backoff's exponent + 1. */
  hellos: number;
  /** When it may be asked next: a check given up is started again by its snapshots only from then. */
  nextAt: number;
  /** When its last unanswered hello was asked: an ended backoff asks no sooner than a second on. */
  askedAt: number;
  /** When its first snapshot or a restart last ended the backoff: at most once per ceiling. */
  resetAt?: number;
}

export interface StaticPeerCheckOptions {
  client: PeerClient;
  runtime: NodeRuntime;
  logger: RuntimeLogger;
  expect: Omit<HelloExpectation, "peerId">;
  now: () => number;
  timing?: RecheckTiming;
  /** The waits between hellos: stopped with the node, so none outlives it. */
  waits?: RecheckWaits;
}

export class StaticPeerChecks {
  private readonly refusals: Refusals<string>;
  private readonly waits: RecheckWaits;
  private readonly timing: RecheckTiming;
  /** The newest epoch each static peer's snapshots named (one entry per static peer at most). */
  private readonly epochs = new Map<string, number>();
  /** Static peers whose check runs now: a restart seen meanwhile starts no second one. */
  private readonly checking = new Set<string>();
  private readonly ids: ReadonlySet<string>;
  /** Each static peer's address as the operator gave it (--peers). */
  private readonly urls: ReadonlyMap<string, string>;
  /** Static peers whose hello passed the check (what it said is noted). */
  private readonly verified = new Set<string>();
  /** Static peers whose last hellos went unanswered, and their backoff. */
  private readonly unanswered = new Map<string, Unanswered>();
  /** Ends the wait of a check backing off unanswered: the peer restarted, so may answer now. */
  private readonly wakes = new Map<string, AbortController>();

  constructor(
    private readonly peers: readonly StaticPeer[],
    private readonly o: StaticPeerCheckOptions,
  ) {
    this.timing = o.timing ?? DEFAULT_RECHECK;
    this.refusals = new Refusals(this.timing, Math.max(1, peers.length));
    this.waits = o.waits ?? new RecheckWaits();
    this.ids = new Set(peers.map((p) => p.id));
    this.urls = new Map(peers.map((p) => [p.id, p.url]));
  }

  /** Checks every peer in the background; the promise settles once every check has ended. */
  start(): Promise<void> {
    return Promise.all(this.peers.map((p) => this.check(p.id))).then(() => {});
  }

  /** The static peers refused now: why, and when each is asked again. */
  view(): RefusedView[] {
    const now = this.o.now();
    return this.refusals.entries().map(([id, r]) => refusedView(id, r, now));
  }

  /**
   * Peer `id` sent a snapshot of its own at `epoch` (a peer-controlled value). A static peer's first
   * epoch is only noted; a newer one is a restart, after which its hello is read and checked again.
   * So is one whose check gave up unanswered (down all through MAX_UNANSWERED hellos): it is up now,
   * but asked no sooner than its backoff allows unless this is its first snapshot or a restart.
   */
  sawEpoch(id: string, epoch: number): void {
    if (!Number.isSafeInteger(epoch) || !this.ids.has(id)) return;
    const seen = this.epochs.get(id);
    const restarted = seen !== undefined && epoch > seen;
    // Noted even while a check runs: a later restart is told from it.
    if (seen === undefined || restarted) {
      this.epochs.set(id, epoch);
      this.endBackoff(id);
    }
    if (this.checking.has(id) || (!restarted && this.verified.has(id))) return;
    const quiet = this.unanswered.get(id);
    if (quiet !== undefined && this.o.now() < quiet.nextAt) return;
    this.o.logger.info(
      { peer: id, epoch },
      restarted ? "static peer restarted: reading its hello again" : "static peer up: reading its hello",
    );
    void this.check(id);
  }

  /** Up now or restarted: a peer backing off unanswered is asked again as if it had just answered. */
  private endBackoff(id: string): void {
    const quiet = this.unanswered.get(id);
    if (quiet === undefined || quiet.hellos === 0) return;
    const now = this.o.now();
    if (quiet.resetAt !== undefined && now - quiet.resetAt < UNANSWERED_BACKOFF.maxMs) return;
    // A check that gave up did so at a hello: the next one waits out the second since.
    const nextAt = Math.max(now, quiet.askedAt + UNANSWERED_RETRY_MS);
    this.unanswered.set(id, { hellos: 0, nextAt, askedAt: quiet.askedAt, resetAt: now });
    this.wakes.get(id)?.abort();
  }

  /** Its hello was answered (passed or refused): its backoff, if any, is over. */
  private answered(id: string): void {
    this.unanswered.delete(id);
  }

  private async check(id: string): Promise<void> {
    this.checking.add(id);
    try {
      await this.checkUntilDone(id);
    } finally {
      this.checking.delete(id);
    }
  }

  private async checkUntilDone(id: string): Promise<void> {
    const { client, runtime, logger } = this.o;
    let garbled = false;
    let wrongAddressSaid = false;
    for (let unanswered = 0; unanswered < MAX_UNANSWERED; ) {
      if (runtime.isStopping || this.waits.stopped) return;
      let refusal: { reason: string; message: string; skewMs?: number } | undefined;
      try {
        // The configured address: a cut-off there is checked for TLS (not one gossip moved it to).
        const hello = await client.hello(id, this.urls.get(id));
        const r = checkPeerHello({ ...this.o.expect, peerId: id }, hello);
        this.answered(id);
        if (r.ok) {
          runtime.admin.notePeerHello(id, r.hello);
          this.verified.add(id);
          const again = runtime.admin.readmitPeer(id);
          this.refusals.forget(id);
          logger.info(
            { peer: id, promptText: r.hello.promptText !== false },
            again ? "peer verified on re-check: admitted" : "peer verified",
          );
          return;
        }
        refusal = r;
      } catch (err) {
        if (refusedNow(err, unanswered)) {
          this.answered(id);
          // A refused timestamp is a clock off, not a missing credential (net/clock-skew.ts).
          const skew = err instanceof TransportError ? err.clockSkewMs : undefined;
          refusal = {
            reason: skew === undefined ? "no-credential" : CLOCK_SKEW,
            message:
              skew === undefined
                ? (err as Error).message
                : `${skewAdvice(skew, "peer")} — ${(err as Error).message}`,
            ...(skew === undefined ? {} : { skewMs: skew }),
          };
        } else {
          // Up but answering garbage (e.g. a node older than protocol 3 under a shared secret, whose
          // answers carry no response MAC): said once, then retried like a peer still starting.
          // An address answering as no peer port (an API port, TLS against plain: wrong-port.ts) is
          // said at once and once per check, plainly; the backoff is that of any unanswered hello.
          if (err instanceof TransportError && err.wrongAddress) {
            if (!wrongAddressSaid) {
              wrongAddressSaid = true;
              logger.error(
                { peer: id, err: err.message },
                "static peer address is not a peer port this node can use",
              );
            }
          } else if (
            err instanceof TransportError &&
            (err.kind === "protocol" || err.unauthenticated) &&
            !garbled
          ) {
            garbled = true;
            logger.warn({ peer: id, err: err.message }, "peer hello not accepted; retrying");
          }
          // A refused peer not answering its re-check (restarting, say) stays refused and is asked
          // again after its backoff, for as long as this node runs: never given up on while refused.
          // One refusing it again without a response MAC is tried as a first check is (each try a
          // second apart, UNAUTHENTICATED_TRIES of them refuse it again), so its backoff grows.
          const refused = this.refusals.get(id);
          const backoffMs =
            refused !== undefined && !definiteRefusal(err)
              ? recheckDelayMs(timingFor(this.timing, refused.reason), refused.refusals)
              : undefined;
          if (backoffMs !== undefined) {
            const waitMs = Math.max(UNANSWERED_RETRY_MS, backoffMs);
            this.refusals.postpone(id, this.o.now() + waitMs);
            if (!(await this.waits.wait(waitMs))) return;
            continue;
          }
          // Tries toward a refusal that lacks a response MAC stay a second apart, as at a first check:
          // UNAUTHENTICATED_TRIES of them decide it. Only silence backs off.
          const waitMs = definiteRefusal(err) ? UNANSWERED_RETRY_MS : this.unansweredHello(id, err);
          if (++unanswered >= MAX_UNANSWERED) {
            logger.info(
              { peer: id, unanswered, retryInS: Math.round(waitMs / 1000) },
              "static peer hello unanswered: left alone until its snapshots come",
            );
            return;
          }
          if (!(await this.backOff(id, waitMs))) return;
          continue;
        }
      }
      const ref = this.refusals.refuse(id, `${refusal.reason}: ${refusal.message}`, this.o.now());
      const waitMs = ref.recheckAt - ref.refusedAt;
      logger.error(
        {
          peer: id,
          reason: refusal.reason,
          recheckInS: Math.round(waitMs / 1000),
          // As a seed's and a member's clock-skew warnings say it: ours minus the peer's.
          ...(refusal.skewMs === undefined ? {} : { skewS: Math.round(refusal.skewMs / 1000) }),
        },
        `peer refused: ${refusal.message}`,
      );
      runtime.admin.refusePeer(id, refusal.message);
      this.verified.delete(id);
      unanswered = 0;
      if (!(await this.waits.wait(waitMs))) return;
    }
  }

  /** Counts an unanswered hello of `id` (not refused): the wait before its next, doubling. */
  private unansweredHello(id: string, err: unknown): number {
    const quiet = this.unanswered.get(id) ?? { hellos: 0, nextAt: 0, askedAt: 0 };
    quiet.hellos++;
    const waitMs = recheckDelayMs(UNANSWERED_BACKOFF, quiet.hellos);
    quiet.askedAt = this.o.now();
    quiet.nextAt = quiet.askedAt + waitMs;
    this.unanswered.set(id, quiet);
    // Said once per streak, when the backoff reaches its ceiling: a peer still starting says nothing.
    const atCeiling =
      waitMs === UNANSWERED_BACKOFF.maxMs && recheckDelayMs(UNANSWERED_BACKOFF, quiet.hellos - 1) < waitMs;
    const fields = {
      peer: id,
      unanswered: quiet.hellos,
      retryInS: Math.round(waitMs / 1000),
      err: err instanceof Error ? err.message : String(err),
    };
    if (atCeiling) this.o.logger.warn(fields, "static peer does not answer its hello: backing off");
    else this.o.logger.debug(fields, "static peer hello unanswered: backing off");
    return waitMs;
  }

  /**
   * Waits `ms` before `id`'s next hello; a restart seen meanwhile (endBackoff) cuts it short, but not
   * below UNANSWERED_RETRY_MS. False when the node stops.
   */
  private async backOff(id: string, ms: number): Promise<boolean> {
    const wake = new AbortController();
    this.wakes.set(id, wake);
    try {
      if (!(await this.waits.wait(UNANSWERED_RETRY_MS))) return false;
      return ms <= UNANSWERED_RETRY_MS || (await this.waits.wait(ms - UNANSWERED_RETRY_MS, wake.signal));
    } finally {
      this.wakes.delete(id);
    }
  }
}
