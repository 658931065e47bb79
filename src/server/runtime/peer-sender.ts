/**
 * Sending the node's messages to peers through the transport, and reporting what became of them as
 * node inputs: a forward's streamed answer and its transport ack, a refusal, or a failure to deliver
 * (transport-rules.ts: [Transport acks], [Refused is not unreachable], [One snapshot in flight]).
 */
import type { EngineRequest } from "../../core/engine.js";
import type { NodeInput, PeerMessage } from "../../core/node/types.js";
import { carrierAck } from "../../net/forward-wire.js";
import { type PeerClient, TransportError } from "../../net/transport-client.js";
import type { ForwardMsg, ReplyMsg, SnapshotMsg } from "../../net/transport-wire.js";
import type { NodeMetrics } from "../metrics.js";
import { certRefusalsOf } from "./cert-refusals.js";
import type { RuntimeLogger } from "./logger.js";
import { SaidPerKey } from "./said-per-key.js";
import { isRefusal, retryableError } from "./transport-rules.js";

export interface PeerSenderOptions {
  client: PeerClient;
  metrics: NodeMetrics;
  logger: RuntimeLogger;
  /**
   * Feeds an outcome back to the node; a forward's answer with `on`, its request and the stream it
   * came on (as `relay`'s): the answer is that stream's run's.
   */
  deliver(input: NodeInput, on?: { request: EngineRequest; stream: string }): void;
  /**
   * Output a peer produced for `request` (a forward's answer, as it streams) on `stream`, one per
   * forward sent: a copy sent again to a restarted peer streams its new process's run from the start.
   */
  relay(request: EngineRequest, source: string, text: string, stream: string): void;
  /** The clock of the log's rate limit; default Date.now. */
  now?: () => number;
}

/** How often refusals of one peer as no peer port (wrong-port.ts) are logged at warn. */
const WRONG_ADDRESS_EVERY_MS = 60_000;

export class PeerSender {
  /** Peers with a snapshot on its way (one at a time each). */
  private readonly snapshotInFlight = new Set<string>();
  /**
   * When each peer's refusals as no peer port were last logged: only those within the last
   * WRONG_ADDRESS_EVERY_MS (a gossip member that leaves is never `forget`-ten here).
   */
  private readonly wrongAddressSaid = new SaidPerKey(WRONG_ADDRESS_EVERY_MS);
  /** Forwards sent so far: names each one's answer stream. */
  private forwards = 0;

  constructor(private readonly o: PeerSenderOptions) {}

  /**
   * One round's snapshot to `to`. Anti-entropy tolerates loss: with one still in flight to a slow peer,
   * this round skips it. The transport encodes each snapshot object once, however many peers it goes to.
   */
  snapshot(to: string, msg: SnapshotMsg): void {
    if (this.snapshotInFlight.has(to)) return;
    if (msg.snapshot.header.pushBackMs > 0) this.o.metrics.pushBack.inc();
    this.snapshotInFlight.add(to);
    this.o.client
      .send(to, msg)
      .then(
        (bytes) => this.o.metrics.gossipBytes.inc({ peer: to, direction: "out" }, bytes),
        (err) => this.failed(to, msg, err),
      )
      .finally(() => this.snapshotInFlight.delete(to));
  }

  /**
   * A forward, its answer streamed back to `relay` as it comes and then fed to the node. The transport's
   * ack carries no ETA: the answer comes back on the same reliable stream, so the node needs no probes
   * for it — a broken stream is reported as a failure at once.
   */
  forward(to: string, msg: ForwardMsg): void {
    const onAck = (epoch?: number) =>
      this.o.deliver({ type: "peer-message", from: to, msg: carrierAck(msg, epoch) });
    const stream = `${to}#${++this.forwards}`;
    this.o.client
      .forward(to, msg, (text) => this.o.relay(msg.request, to, text, stream), onAck)
      .then(
        (reply: ReplyMsg) =>
          this.o.deliver({ type: "peer-message", from: to, msg: reply }, { request: msg.request, stream }),
        (err) => {
          if (isRefusal(err)) {
            // The peer is up but refused or garbled it: fall back without suspecting the peer.
            this.o.logger.warn({ peer: to, err: err.message }, "forward refused");
            // A channel whose 101 was not the peer's: counted with the port's authentication refusals.
            if (err.authRefusal !== undefined) this.o.metrics.authRejected.inc({ reason: err.authRefusal });
            this.o.deliver({ type: "peer-message", from: to, msg: retryableError(msg, err.message) });
            return;
          }
          this.failed(to, msg, err);
        },
      );
  }

  /** An answer to a forward whose stream has closed, on a request of its own. */
  reply(to: string, msg: ReplyMsg): void {
    this.o.client.send(to, msg).catch((err) => this.failed(to, msg, err));
  }

  /** Best effort: a lost goodbye or cancel only costs the peer time or work (an old peer answers 400). */
  bestEffort(to: string, msg: Extract<PeerMessage, { type: "goodbye" | "cancel" }>): Promise<unknown> {
    return this.o.client.send(to, msg).catch(() => {});
  }

  /** A message to a peer nothing may be sent to: the node treats it like an unreachable peer. */
  undeliverable(to: string, msg: PeerMessage, reason: string): void {
    queueMicrotask(() => this.o.deliver({ type: "send-failed", to, msg, reason }));
  }

  /** A peer that left the membership. */
  forget(peer: string): void {
    this.snapshotInFlight.delete(peer);
    this.wrongAddressSaid.forget(peer);
  }

  /** Whether a refusal of `to` as no peer port is said now: at most once per WRONG_ADDRESS_EVERY_MS. */
  private sayWrongAddress(to: string): boolean {
    const now = this.o.now?.() ?? Date.now();
    // Asked before taken, nothing held back: past its minute an entry is dropped (departed peers).
    if (!this.wrongAddressSaid.due(to, now)) return false;
    this.wrongAddressSaid.take(to, now);
    return true;
  }

  private failed(to: string, msg: PeerMessage, err: unknown): void {
    const kind = err instanceof TransportError ? err.kind : "connection";
    this.o.metrics.peerFailures.inc({ peer: to, reason: kind });
    if (isRefusal(err)) {
      const fields = { peer: to, msg: msg.type, err: err.message };
      // A peer address that is no peer port refuses every snapshot, twice a second: said once a
      // minute (its hello check says the mistake at once: static-peer-checks.ts), the rest at debug.
      if (err.wrongAddress && !this.sayWrongAddress(to)) this.o.logger.debug(fields, "peer refused message");
      else this.o.logger.warn(fields, "peer refused message");
      return;
    }
    if (err instanceof TransportError && err.certRefused)
      certRefusalsOf(this.o.client, this.o.now).failed(this.o.logger, to, err, msg.type);
    else
      this.o.logger.debug(
        { peer: to, msg: msg.type, kind, err: (err as Error)?.message },
        "peer send failed",
      );
    this.o.deliver({ type: "send-failed", to, msg, reason: `${kind}: ${(err as Error)?.message ?? ""}` });
  }
}
