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

/** Hellos tried (one a second) while a peer does not answer at all, before it is left alone. */
const MAX_UNANSWERED = 600;
const UNANSWERED_RETRY_MS = 1_000;

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
  /** Static peers whose hello passed the check (what it said is noted). */
  private readonly verified = new Set<string>();

  constructor(
    private readonly peers: readonly StaticPeer[],
    private readonly o: StaticPeerCheckOptions,
  ) {
    this.timing = o.timing ?? DEFAULT_RECHECK;
    this.refusals = new Refusals(this.timing, Math.max(1, peers.length));
    this.waits = o.waits ?? new RecheckWaits();
    this.ids = new Set(peers.map((p) => p.id));
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
   * So is one whose check gave up unanswered (down all through MAX_UNANSWERED hellos): it is up now.
   */
  sawEpoch(id: string, epoch: number): void {
    if (!Number.isSafeInteger(epoch) || !this.ids.has(id)) return;
    const seen = this.epochs.get(id);
    const restarted = seen !== undefined && epoch > seen;
    // Noted even while a check runs: a later restart is told from it.
    if (seen === undefined || restarted) this.epochs.set(id, epoch);
    if (this.checking.has(id) || (!restarted && this.verified.has(id))) return;
    this.o.logger.info(
      { peer: id, epoch },
      restarted ? "static peer restarted: reading its hello again" : "static peer up: reading its hello",
    );
    void this.check(id);
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
    for (let unanswered = 0; unanswered < MAX_UNANSWERED; ) {
      if (runtime.isStopping || this.waits.stopped) return;
      let refusal: { reason: string; message: string; skewMs?: number } | undefined;
      try {
        const hello = await client.hello(id);
        const r = checkPeerHello({ ...this.o.expect, peerId: id }, hello);
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
          if (err instanceof TransportError && (err.kind === "protocol" || err.unauthenticated) && !garbled) {
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
          if (backoffMs === undefined) unanswered++;
          const waitMs = Math.max(UNANSWERED_RETRY_MS, backoffMs ?? 0);
          if (refused) this.refusals.postpone(id, this.o.now() + waitMs);
          if (!(await this.waits.wait(waitMs))) return;
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
}
