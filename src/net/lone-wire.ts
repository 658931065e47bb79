/**
 * The messages that travel on a request of their own (transport-wire.ts has the table): each as its
 * HTTP request, and POST /peer/message's body read back, validated.
 */
import type { Snapshot } from "../core/snapshot.js";
import { replyToWire } from "./answer-wire.js";
import { snapshotHeaders } from "./snapshot-wire.js";
import {
  type Decoded,
  type LoneMessage,
  MESSAGE_PATH,
  SNAPSHOT_PATH,
  type SnapshotMsg,
} from "./transport-wire.js";
import { messageWireSchema } from "./wire-schemas.js";

/** A lone message as one HTTP request: where it goes, its body and its headers. */
export interface WireRequest {
  path: string;
  body: Uint8Array;
  headers: Record<string, string>;
}

/** `m` as its request; `snapshotBytes` gives a snapshot's codec bytes (the caller encodes each once). */
export function loneMessageToWire(m: LoneMessage, snapshotBytes: (s: Snapshot) => Uint8Array): WireRequest {
  if (m.type === "snapshot") {
    return { path: SNAPSHOT_PATH, body: snapshotBytes(m.snapshot), headers: snapshotHeaders(m) };
  }
  const wire = m.type === "result" || m.type === "error" ? replyToWire(m) : m;
  return {
    path: MESSAGE_PATH,
    body: Buffer.from(JSON.stringify(wire)),
    headers: { "content-type": "application/json" },
  };
}

/** The body of POST /peer/message (parsed JSON) as its message, validated; or why it was refused. */
export function messageFromWire(json: unknown): Decoded<Exclude<LoneMessage, SnapshotMsg>> {
  const parsed = messageWireSchema.safeParse(json);
  if (!parsed.success) return { ok: false, error: `bad message: ${parsed.error.issues[0]?.message}` };
  return { ok: true, msg: parsed.data };
}
