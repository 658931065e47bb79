/**
 * Two in-process nodes in shared-secret mode, forwards over HTTP (`forwardTransport: "http"`): A
 * reaches B through an on-path relay. Untouched, a forward is served by B end to end; with B's final
 * record rewritten on the path, A refuses the answer as garbled and falls back, and the client gets
 * an answer that is not the forged text.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { writeSecretFile } from "../../src/net/auth/secret.js";
import type { NodeHandle } from "../../src/server/runtime/start-node.js";
import { postCompletion } from "../api-client.js";
import { type Answer, editRecord, onPathRelay } from "../net/on-path-relay.js";
import { routedPair } from "./helpers.js";

const FORGED = "forged-by-the-path";

describe("shared-secret forwards over HTTP through an on-path relay", () => {
  const dir = mkdtempSync(join(tmpdir(), "prefixmesh-respmac-"));
  const nodes: NodeHandle[] = [];
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    await Promise.all(closers.map((c) => c()));
    await Promise.all(nodes.map((n) => n.stop()));
    rmSync(dir, { recursive: true, force: true });
  });

  it("serves B's answer untouched, and falls back on one altered on the path", async () => {
    const secretFile = join(dir, "secret");
    await writeSecretFile(secretFile);
    const prefix = Array.from({ length: 300 }, (_, i) => `hmac${i}`).join(" ");
    const { a, b, model } = await routedPair(
      prefix,
      {},
      {
        extra: { insecure: false, secretFile, forwardTransport: "http" },
        onStart: (...n) => nodes.push(...n),
      },
    );
    let tamper = false;
    const forge = (x: Answer) =>
      editRecord(x, /"t":"msg"/, (json) => {
        const rec = JSON.parse(json) as { msg: { result?: { text: string } } };
        if (rec.msg.result) rec.msg.result.text = FORGED;
        return JSON.stringify(rec);
      });
    const bPeer = a.runtime.admin.peerUrl("B")!;
    const relay = await onPathRelay(bPeer, (x) => (tamper && x.path === "/peer/forward" ? forge(x) : x));
    closers.push(relay.close);
    a.runtime.admin.movePeer("B", relay.url);

    const ask = async (q: string) => {
      const res = await postCompletion(a.apiUrl, { model, prompt: `${prefix} ${q}`, max_tokens: 4 });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { choices: { text: string }[] };
      return { by: res.headers.get("x-prefixmesh-served-by"), text: body.choices[0]!.text };
    };
    const honest = await ask("first");
    expect(honest.by).toBe("B");
    expect(relay.answers.some((x) => x.path === "/peer/forward" && x.status === 200)).toBe(true);

    tamper = true;
    const forwardsBefore = relay.answers.filter((x) => x.path === "/peer/forward").length;
    const forged = await ask("second");
    // B was asked and answered; its altered answer was refused and A ran the request itself.
    expect(relay.answers.filter((x) => x.path === "/peer/forward").length).toBe(forwardsBefore + 1);
    expect(forged.by).toBe("A");
    expect(forged.text).not.toContain(FORGED);
    expect(b).toBeDefined();
  });
});
