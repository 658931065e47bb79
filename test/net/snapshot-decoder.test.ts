/**
 * The snapshot decoder's worker path: a frame handed over in the chunks it arrived in is joined and
 * decoded on the worker thread, equal to decoding it whole here. The worker is the compiled one
 * (dist/): this file skips, saying so, when the build is absent.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import type { Snapshot } from "../../src/core/snapshot.js";
import { decodeSnapshot, encodeSnapshot } from "../../src/core/snapshot-codec.js";
import { SnapshotDecoder } from "../../src/net/snapshot-decoder.js";

const workerUrl = new URL("../../dist/net/snapshot-decode-worker.js", import.meta.url);
const built = existsSync(fileURLToPath(workerUrl));
if (!built)
  console.warn(`snapshot-decoder.test: ${fileURLToPath(workerUrl)} is missing (npm run build): skipped`);

function frame(keys: number): Uint8Array {
  const s: Snapshot = {
    kind: "full",
    header: {
      sender: "B",
      epoch: 1,
      version: 3,
      tokenCount: keys * 16,
      capacity: keys * 16,
      queueDepth: 0,
      pushBackMs: 0,
    },
    body: { blockSize: 16, keys: Float64Array.from({ length: keys }, (_, i) => i * 104_729 + 1) },
  };
  return encodeSnapshot(s);
}

/** `bytes` cut at `cuts`: chunks alternately whole buffers of their own and views into one shared buffer. */
function chunked(bytes: Uint8Array, cuts: number[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  let at = 0;
  for (const [i, end] of [...cuts, bytes.byteLength].entries()) {
    const part = bytes.subarray(at, end);
    if (i % 2 === 0) out.push(part.slice());
    else {
      const shared = new Uint8Array(part.byteLength + 8);
      shared.set(part, 4);
      out.push(shared.subarray(4, 4 + part.byteLength));
    }
    at = end;
  }
  return out;
}

describe.skipIf(!built)("SnapshotDecoder on its worker", () => {
  let decoder: SnapshotDecoder | undefined;
  afterEach(async () => decoder?.close());

  it("joins a frame's chunks on the worker and decodes it as a whole frame decodes", async () => {
    decoder = new SnapshotDecoder({ workerUrl, inlineBytes: 0 });
    expect(decoder.offThread).toBe(true);
    const bytes = frame(50_000);
    const chunks = chunked(bytes, [7, 65_536, 100_000, 250_000]);
    const r = await decoder.decode(chunks, 1 << 24);
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.snapshot).toEqual(decodeSnapshot(bytes));
    // Chunks that were all of their buffer travelled (detached); views into a shared one were copied.
    expect(chunks[0]!.byteLength).toBe(0);
    expect(chunks[1]!.byteLength).toBeGreaterThan(0);
  });

  it("refuses a corrupt or oversized chunked frame with a clear error, not as busy", async () => {
    decoder = new SnapshotDecoder({ workerUrl, inlineBytes: 0 });
    const bad = frame(1000);
    bad[bad.byteLength - 1]! ^= 0xff;
    const r = await decoder.decode(chunked(bad, [100]), 1 << 24);
    expect(r).toMatchObject({ ok: false });
    expect(r.ok ? undefined : r.busy).toBeUndefined();
    const big = await decoder.decode(chunked(frame(1000), [100, 2000]), 1000);
    expect(big.ok).toBe(false);
    expect(big.ok ? "" : big.error).toMatch(/exceeds|too large|size/i);
  });
});
