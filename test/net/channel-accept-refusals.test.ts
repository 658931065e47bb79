/**
 * The forward channel's 101 answer in shared-secret mode (auth/channel-mac.ts), over a path that
 * tampers with it: a real peer tags it and the channel runs; the origin refuses a 101 stripped of its
 * tag, or carrying another upgrade's or a forger's, before any frame, with a reason that says so, and
 * its forward fails as a garbled one (the runtime falls back: test/server/channel-accept-auth.test.ts).
 * All on 127.0.0.1.
 */
import { describe, expect, it } from "vitest";
import { HEADER_CHANNEL_MAC } from "../../src/net/auth/channel-mac.js";
import { hmacAuth } from "../../src/net/transport-auth.js";
import { channelHarness, REFUSED_MISSING, REFUSED_WRONG, tagAs } from "./channel-accept-harness.js";
import { fwd, SECRET } from "./fixtures.js";
import { onPathUpgradeRelay } from "./on-path-relay.js";

const { closers, realPeer, client, failure, forger } = channelHarness();

describe("the 101 answer of a real peer (shared-secret mode)", () => {
  it("carries its channel MAC, and the channel runs", async () => {
    const { url, forwards } = await realPeer(hmacAuth("B", SECRET));
    const relay = await onPathUpgradeRelay(url);
    closers.push(relay.close);
    const c = client();
    c.setPeer("B", relay.url);
    await expect(c.forward("B", fwd("A-1"), () => {})).resolves.toMatchObject({
      type: "result",
      reqId: "A-1",
    });
    expect(forwards).toEqual(["A-1"]);
    expect(relay.heads[0]).toMatch(/^HTTP\/1\.1 101 /);
    expect(relay.heads[0]).toMatch(new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]{32}(\\r\\n|$)`));
  });

  it("is refused when the path strips its MAC or puts another upgrade's in, and no forward runs", async () => {
    const { url, forwards } = await realPeer(hmacAuth("B", SECRET));
    let mode: "strip" | "replay" | "pass" = "pass";
    let kept: string | undefined;
    const relay = await onPathUpgradeRelay(url, (head) => {
      const tag = new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: ([0-9a-f]+)`).exec(head)?.[1];
      if (mode === "pass") {
        kept = tag;
        return head;
      }
      if (mode === "strip") return head.replace(new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]+`), "");
      return head.replace(tag ?? "", kept ?? ""); // an earlier channel's tag: another nonce and key
    });
    closers.push(relay.close);

    const c = client();
    c.setPeer("B", relay.url);
    await expect(c.forward("B", fwd("A-0"), () => {})).resolves.toMatchObject({ type: "result" });
    expect(kept).toMatch(/^[0-9a-f]{32}$/);

    mode = "strip";
    const c1 = client();
    c1.setPeer("B", relay.url);
    expect(await failure(c1, "A-1")).toEqual(REFUSED_MISSING);

    mode = "replay";
    const c2 = client();
    c2.setPeer("B", relay.url);
    expect(await failure(c2, "A-2")).toEqual(REFUSED_WRONG);
    // The forward frames never went: the server's node saw only the honest channel's forward.
    expect(forwards).toEqual(["A-0"]);

    // A refused channel is not kept: the next forward opens another, which the path now leaves alone.
    mode = "pass";
    await expect(c2.forward("B", fwd("A-3"), () => {})).resolves.toMatchObject({
      type: "result",
      reqId: "A-3",
    });
  });
});

describe("a 101 answered on the path (shared-secret mode)", () => {
  it("is taken only with the tag B itself would send (the check's control)", async () => {
    const f = await forger(tagAs());
    const c = client();
    c.setPeer("B", f.url);
    await expect(c.forward("B", fwd("A-1"), () => {})).resolves.toMatchObject({ type: "result" });
    expect(f.taken).toEqual(["A-1"]);
  });

  it.each([
    ["no MAC", () => undefined, REFUSED_MISSING],
    [
      "a MAC for another upgrade (wrong nonce)",
      tagAs((b) => ({ ...b, nonce: "x".repeat(32) })),
      REFUSED_WRONG,
    ],
    ["a MAC by another node (wrong node id)", tagAs((b) => ({ ...b, server: "C" })), REFUSED_WRONG],
    ["a MAC for another client", tagAs((b) => ({ ...b, client: "C" })), REFUSED_WRONG],
    ["garbage", () => "not a tag", REFUSED_WRONG],
  ])("with %s is refused before any frame, saying why", async (_what, tagFor, want) => {
    const f = await forger(tagFor);
    const c = client();
    c.setPeer("B", f.url);
    expect(await failure(c, "A-1")).toEqual(want);
    expect(f.taken).toEqual([]);
  });
});
