/**
 * The SUB connection to a publisher. ZMQ reconnects a dropped connection by itself, except after a
 * protocol error, which an oversized message is: the connection then stays down for good. A
 * disconnect followed by neither a reconnect nor a retry is made again here (the batches missed
 * meanwhile are a gap).
 */
import { Subscriber } from "zeromq";

/** A SUB socket on `endpoint`, subscribed to `topic`, refusing payloads past `maxPayloadBytes`. */
export function subscribe(endpoint: string, topic: Buffer, maxPayloadBytes: number): Subscriber {
  const sub = new Subscriber({
    linger: 0,
    // Frames beyond this are refused by ZMQ itself (the connection is dropped, then re-made).
    maxMessageSize: maxPayloadBytes + 1024,
    // The subscriber's reader drains ZMQ into its bounded queue at once; ZMQ itself holds little.
    receiveHighWaterMark: 1_000,
  });
  sub.connect(endpoint);
  sub.subscribe(topic);
  return sub;
}

/** How long a dropped connection may stay down with no reconnect attempt before we make one. */
const RECONNECT_CHECK_MS = 500;

export interface ConnectionHooks {
  closed(): boolean;
  /** The connection dropped (ZMQ may yet make it again). */
  dropped(): void;
  /** ZMQ did not: we connect again now. */
  reconnecting(): void;
}

/** Watches `sub`'s connection to `endpoint` and makes it again when ZMQ gave it up. */
export function watchConnection(sub: Subscriber, endpoint: string, hooks: ConnectionHooks): void {
  let timer: NodeJS.Timeout | undefined;
  const settle = () => {
    if (timer) clearTimeout(timer);
    timer = undefined;
  };
  sub.events.on("connect", settle);
  sub.events.on("connect:retry", settle);
  sub.events.on("disconnect", () => {
    settle();
    hooks.dropped();
    timer = setTimeout(() => {
      timer = undefined;
      if (hooks.closed()) return;
      hooks.reconnecting();
      try {
        sub.disconnect(endpoint);
      } catch {
        // Already gone: ZMQ terminated the connection.
      }
      sub.connect(endpoint);
    }, RECONNECT_CHECK_MS);
  });
  sub.events.on("close", settle);
}
