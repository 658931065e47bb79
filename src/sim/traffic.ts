/**
 * The run's traffic as counted (a measurement, not part of the protocol): messages and bytes per
 * kind as sent, bytes by send time (bytes-by-time.ts) and, with `meshParts`, the mesh bytes by part
 * as delivered (mesh-parts.ts).
 */
import type { MeshMessage, NodeId, PeerMessage } from "../core/node/types.js";
import { addBytesAt, BYTES_BUCKET_MS, type BytesByTime, newBytesByTime } from "./bytes-by-time.js";
import { addMeshParts, type MeshParts, sumMeshParts } from "./mesh-parts.js";
import { meshBytes, meshKind, messageBytes, messageKind } from "./message-size.js";
import type { MessageTotals } from "./types.js";

export class Traffic {
  private readonly messages: Record<string, MessageTotals> = {};
  /** Mesh bytes by part, as delivered, per BYTES_BUCKET_MS of virtual time (config.meshParts). */
  private readonly meshPartsByTime: MeshParts[] | undefined;
  private readonly bytesByTime: BytesByTime = newBytesByTime();

  constructor(meshParts: boolean) {
    this.meshPartsByTime = meshParts ? [] : undefined;
  }

  /** A peer message sent at `now`. */
  peer(msg: PeerMessage, now: number): void {
    const kind = messageKind(msg);
    let t = this.messages[kind];
    if (t === undefined) {
      t = { count: 0, bytes: 0 };
      this.messages[kind] = t;
    }
    const bytes = messageBytes(msg);
    t.count++;
    t.bytes += bytes;
    addBytesAt(this.bytesByTime, now, kind, bytes);
  }

  /** A mesh (SWIM, Scuttlebutt) message sent at `now`. */
  mesh(msg: MeshMessage, now: number): void {
    const kind = meshKind(msg);
    const t = this.messages[kind] ?? { count: 0, bytes: 0 };
    this.messages[kind] = t;
    const bytes = meshBytes(msg);
    t.count++;
    t.bytes += bytes;
    addBytesAt(this.bytesByTime, now, kind, bytes);
  }

  /** A mesh message from `from` delivered at `now` to a node holding `heldOf` (with `meshParts`). */
  meshDelivered(
    now: number,
    msg: MeshMessage,
    from: NodeId,
    heldOf: (owner: NodeId) => { epoch: number; version: number } | undefined,
  ): void {
    const byTime = this.meshPartsByTime;
    if (!byTime) return;
    const b = Math.floor(now / BYTES_BUCKET_MS);
    while (byTime.length <= b) byTime.push({});
    addMeshParts(byTime[b] as MeshParts, msg, from, heldOf);
  }

  /** The result's traffic totals, in the result's field order. */
  totals() {
    let msgCount = 0;
    let msgBytes = 0;
    for (const t of Object.values(this.messages)) {
      msgCount += t.count;
      msgBytes += t.bytes;
    }
    const byTime = this.meshPartsByTime;
    return {
      messages: this.messages,
      ...(byTime ? { meshParts: sumMeshParts(byTime), meshPartsByTime: byTime } : {}),
      bytesByTime: this.bytesByTime,
      messagesTotal: msgCount,
      bytesTotal: msgBytes,
    };
  }
}
