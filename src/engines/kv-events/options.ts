/**
 * Options of the KV-event cache model (the remote engine's `kvEvents`), apart from the model itself:
 * specs validate without loading zeromq's native addon.
 */
import { z } from "zod";

/** A ZMQ address the subscriber connects to: tcp://HOST:PORT (or ipc://PATH on the same machine). */
export const zmqEndpointSchema = z
  .string()
  .max(1024)
  .regex(
    /^(tcp:\/\/(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]+):\d{1,5}|ipc:\/\/[^\s]+)$/,
    "must be tcp://HOST:PORT (e.g. tcp://10.0.0.5:5557) or ipc://PATH",
  )
  .refine(
    (s) => !s.startsWith("tcp://") || Number(s.slice(s.lastIndexOf(":") + 1)) <= 65535,
    "port must be ≤ 65535",
  );

export const KvEventsOptionsSchema = z.object({
  /** The engine's KV-event PUB address (its `endpoint`, with the engine's host for `*`). */
  endpoint: zmqEndpointSchema,
  /** Its replay ROUTER address (`replay_endpoint`); without one, any lost batch degrades the mirror. */
  replayEndpoint: zmqEndpointSchema.optional(),
  /** The engine's `topic` (both engines default to ""). */
  topic: z.string().max(256).default(""),
  /** Data-parallel rank followed: each rank publishes on its own port (endpoint port + rank). */
  rank: z.number().int().min(0).max(65_535).default(0),
  /** KV-cache group followed (hybrid-attention models publish one per group). */
  group: z.number().int().min(0).max(65_535).default(0),
  replayTimeoutMs: z.number().int().min(10).max(600_000).default(2_000),
  /** Replay-probe an idle publisher this often, to find batches lost with nothing after them (0: never). */
  probeIntervalMs: z.number().int().min(0).max(3_600_000).default(5_000),
  /** After a run, wait up to this long for the events of its prompt's blocks (0: never wait). */
  settleMs: z.number().int().min(0).max(10_000).default(50),
  maxBlocks: z
    .number()
    .int()
    .min(1)
    .max(1 << 26)
    .default(1 << 20),
  maxPayloadBytes: z
    .number()
    .int()
    .min(1024)
    .max(1 << 30)
    .default(16 << 20),
  /** Live batches (and their bytes) held while a replay runs; beyond, the oldest are dropped. */
  maxQueuedBatches: z
    .number()
    .int()
    .min(1)
    .max(1 << 20)
    .default(4_096),
  maxQueuedBytes: z
    .number()
    .int()
    .min(1 << 16)
    .max(2 ** 32)
    .default(64 << 20),
  /**
   * The engine computes a prompt's last token even when all of it is cached (vLLM does), so it
   * reports at most the whole blocks before that token as cached.
   */
  computesLastToken: z.boolean().default(true),
});
export type KvEventsOptions = z.input<typeof KvEventsOptionsSchema>;
export type KvEventsConfig = z.output<typeof KvEventsOptionsSchema>;
