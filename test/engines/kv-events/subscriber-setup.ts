/** The KV-event subscriber tests' set-up: a publisher double, a mirror and a subscriber following it. */
import { createServer } from "node:net";
import { KvCacheMirror } from "../../../src/engines/kv-events/mirror.js";
import { KvEventsSubscriber, type KvSubscriberOptions } from "../../../src/engines/kv-events/subscriber.js";
import { type DoubleEvent, type DoubleOptions, KvEventPublisherDouble } from "./publisher-double.js";

export const open: { close(): Promise<void> }[] = [];

/** A new publisher bound at the closed `pub`'s addresses (the engine restarted), subscribed to. */
export async function rebound(pub: KvEventPublisherDouble): Promise<KvEventPublisherDouble> {
  const again = await KvEventPublisherDouble.start({
    bindAt: { endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint },
  });
  open.push(again);
  await again.subscribed();
  return again;
}
/** Closes what the test opened, the last first: each test file runs it after each test. */
export async function closeOpen(): Promise<void> {
  for (const o of open.splice(0).reverse()) await o.close();
}

export async function waitFor(what: string, cond: () => boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export async function setup(
  d: DoubleOptions = {},
  s: Partial<KvSubscriberOptions> = {},
  before?: (pub: KvEventPublisherDouble) => Promise<void>,
) {
  const pub = await KvEventPublisherDouble.start(d);
  open.push(pub);
  await before?.(pub);
  const mirror = new KvCacheMirror();
  const sub = new KvEventsSubscriber(mirror, {
    endpoint: pub.endpoint,
    replayEndpoint: pub.replayEndpoint || undefined,
    topic: "kv-events",
    replayTimeoutMs: 2_000,
    probeIntervalMs: 60_000,
    ...s,
  });
  open.push(sub);
  sub.start();
  await pub.subscribed();
  return { pub, mirror, sub };
}

export const T = (...t: number[]) => Uint32Array.from(t);
/** A block of tokens [t, t+1] with hash t, chained to `parent` (a hash) or starting a sequence. */
export const block = (t: number, parent: number | null = null): DoubleEvent => ({
  type: "BlockStored",
  hashes: [t],
  parent,
  tokens: [t, t + 1],
  blockSize: 2,
});

/** Once synced, the old engine publishes two batches (blocks 10–13) and the mirror applies them. */
export async function oldEngineBlocks(pub: KvEventPublisherDouble, sub: KvEventsSubscriber): Promise<void> {
  await waitFor("sync", () => sub.status().synced);
  await pub.publish([block(10)]);
  await pub.publish([block(12, 10)]);
  await waitFor("two batches", () => sub.status().nextSequence === 2);
}

/** A port free on 127.0.0.1 a moment ago. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}
