/**
 * What a forward carries across the transport, over the channel and over HTTP: the prompt text a
 * peer turns out to need, the sampling fields, and the acking node's epoch.
 */
import { describe, expect, it } from "vitest";
import type { PeerServerHandlers } from "../../src/net/peer-handlers.js";
import { hmacAuth } from "../../src/net/transport-auth.js";
import { PROMPT_TEXT_NEEDED } from "../../src/net/transport-wire.js";
import { fwd, resultFor, SECRET } from "./fixtures.js";
import { peerHarness } from "./transport-fixtures.js";

const { start, client } = peerHarness();

describe("a peer that needs the prompt text its hello said it did not", () => {
  it.each(["channel", "http"] as const)(
    "gets the forward again with the text at once, and from then on (%s), acked exactly once",
    async (transport) => {
      const seen: (string | undefined)[] = [];
      // The peer's engine now needs the text: a forward without it is refused before its node sees it.
      const onForward: PeerServerHandlers["onForward"] = (_from, msg, reply) => {
        seen.push(msg.request.prompt);
        if (msg.request.prompt === undefined) {
          reply.finish({
            type: "error",
            reqId: msg.reqId,
            attempt: msg.attempt,
            error: PROMPT_TEXT_NEEDED,
            retryable: true,
          });
          return;
        }
        reply.ack();
        // Answered after the deferred ack has left: the re-send's ack must reach the origin.
        setTimeout(() => reply.finish(resultFor(msg, "ok")), 40);
      };
      const { url } = await start(hmacAuth("B", SECRET), "B", undefined, onForward);
      const c = client(hmacAuth("A", SECRET), {}, transport);
      c.setPeer("B", url);
      c.setPromptText("B", false); // what its hello said
      let acks = 0;
      const reply = await c.forward(
        "B",
        fwd("A-1"),
        () => {},
        () => acks++,
      );
      expect(reply).toMatchObject({ type: "result", reqId: "A-1" });
      expect(seen).toEqual([undefined, "abcd"]);
      // Acked once: over HTTP the refused copy's response headers ack and the re-send's is not passed
      // on; over the channel the refusal carries no ack and the re-send's deferred ack does.
      expect(acks).toBe(1);
      expect(c.sendsPromptText("B")).toBe(true);
      await c.forward("B", fwd("A-2"), () => {});
      expect(seen).toEqual([undefined, "abcd", "abcd"]);
    },
  );
});

describe("a forward's sampling fields", () => {
  it.each(["channel", "http"] as const)(
    "reach the peer's node as sent (%s), penalties included",
    async (transport) => {
      const seen: unknown[] = [];
      const onForward: PeerServerHandlers["onForward"] = (_from, msg, reply) => {
        seen.push(msg.request);
        reply.ack();
        reply.finish(resultFor(msg, "ok"));
      };
      const { url } = await start(hmacAuth("B", SECRET), "B", undefined, onForward);
      const c = client(hmacAuth("A", SECRET), {}, transport);
      c.setPeer("B", url);
      const base = fwd("A-1");
      const sampled = { temperature: 0, topP: 0.9, seed: 7, presencePenalty: 1.5, frequencyPenalty: -0.5 };
      await c.forward("B", { ...base, request: { ...base.request, ...sampled } }, () => {});
      expect(seen[0]).toMatchObject(sampled);
    },
  );
});

describe("a forward's ack says the acking node's epoch", () => {
  const EPOCH = 1_733_380_000_123;
  it.each(["channel", "http"] as const)(
    "reaches the origin with the ack, before the answer (%s); an ack without one says none",
    async (transport) => {
      const events: string[] = [];
      let acked!: () => void;
      const ackSeen = new Promise<void>((r) => {
        acked = r;
      });
      const onForward: PeerServerHandlers["onForward"] = (_from, msg, reply) => {
        reply.ack(msg.reqId === "A-old" ? undefined : EPOCH);
        // The answer waits for the origin to see the ack (a generous fallback keeps a broken ack
        // from hanging the test: the order check below then fails).
        const fallback = new Promise((r) => setTimeout(() => r("fallback"), 5_000));
        void Promise.race([ackSeen, fallback]).then((why) => {
          if (why === "fallback") events.push("ack not seen");
          reply.finish(resultFor(msg, "ok"));
        });
      };
      const { url } = await start(hmacAuth("B", SECRET), "B", undefined, onForward);
      const c = client(hmacAuth("A", SECRET), {}, transport);
      c.setPeer("B", url);
      const said: (number | undefined)[] = [];
      const onAck = (epoch?: number) => {
        events.push("ack");
        said.push(epoch);
        acked();
      };
      await c.forward("B", fwd("A-1"), () => {}, onAck).then(() => events.push("answer"));
      expect(events).toEqual(["ack", "answer"]);
      await c.forward("B", fwd("A-old"), () => {}, onAck);
      expect(said).toEqual([EPOCH, undefined]);
    },
  );
});
