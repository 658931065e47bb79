/**
 * The forward channel's 101 MAC with peers whose builds predate it (served as before once their hello
 * says so, the MAC required again as soon as they seal one), and in insecure mode, which neither
 * sends nor checks one. All on 127.0.0.1.
 */
import { describe, expect, it } from "vitest";
import { HEADER_CHANNEL_MAC } from "../../src/net/auth/channel-mac.js";
import { hmacAuth, insecureAuth, type PeerAuth } from "../../src/net/transport-auth.js";
import { CHANNEL_ACCEPT_REFUSED, type PeerClient, TransportError } from "../../src/net/transport-client.js";
import { channelHarness, REFUSED_MISSING, REFUSED_WRONG, tagAs } from "./channel-accept-harness.js";
import { fwd, SECRET } from "./fixtures.js";
import { onPathUpgradeRelay } from "./on-path-relay.js";

const { closers, realPeer, client, failure, forger } = channelHarness();

/** Forwards until one is served, each failing one refused as a 101 without its MAC (generous deadline). */
async function servedSoon(c: PeerClient, ms = 10_000): Promise<void> {
  for (let i = 0, t0 = Date.now(); ; i++) {
    const ok = await c
      .forward("B", fwd(`A-poll-${i}`), () => {})
      .then(
        () => true,
        (e: unknown) => {
          expect((e as TransportError).authRefusal).toBe(CHANNEL_ACCEPT_REFUSED);
          return false;
        },
      );
    if (ok) return;
    if (Date.now() - t0 > ms) throw new Error("timed out: the forward is still refused");
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("peers that predate the 101's MAC, and the other modes", () => {
  /** B of a build before the 101 MAC: its auth has no sealChannelAccept. */
  const legacyB = (): PeerAuth => {
    const { sealChannelAccept: _, ...rest } = hmacAuth("B", SECRET);
    return rest;
  };

  it("a peer whose hello did not say it seals its 101 is served as before; one not yet checked is refused", async () => {
    const { url, forwards } = await realPeer(legacyB());
    const c = client();
    c.setPeer("B", url);
    // No hello noted yet: nothing says B is of an older build, so the MAC is required.
    expect(await failure(c, "A-1")).toEqual(REFUSED_MISSING);
    c.setChannelAcceptMac("B", false); // its checked hello said nothing of it
    await expect(c.forward("B", fwd("A-2"), () => {})).resolves.toMatchObject({
      type: "result",
      reqId: "A-2",
    });
    expect(forwards).toEqual(["A-2"]);
    // Moving to another address keeps what its hello said.
    c.setPeer("B", `${url}/`);
    await expect(c.forward("B", fwd("A-3"), () => {})).resolves.toMatchObject({ type: "result" });
  });

  it("a peer noted as sealing its 101 that now runs an older build is asked its hello again, then served", async () => {
    // B's hello said it seals its 101; B was then rolled back (or restarted without leaving) to a
    // build before the MAC, or its first hello never came (a static peer down at our start).
    const { url, forwards, hellos } = await realPeer(legacyB());
    const c = client();
    c.setPeer("B", url);
    c.setChannelAcceptMac("B", true);
    expect(await failure(c, "A-1")).toEqual(REFUSED_MISSING);
    await servedSoon(c);
    expect(forwards).toHaveLength(1);
    expect(hellos.n).toBe(1);
  });

  it("a MAC stripped on the path only has the peer's hello read again, which keeps the MAC required", async () => {
    const { url, forwards, hellos } = await realPeer(hmacAuth("B", SECRET));
    const stripped = new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]+`);
    const relay = await onPathUpgradeRelay(url, (head) => head.replace(stripped, ""));
    closers.push(relay.close);
    const c = client();
    c.setPeer("B", relay.url);
    expect(await failure(c, "A-1")).toEqual(REFUSED_MISSING);
    for (const t0 = Date.now(); hellos.n === 0; ) {
      if (Date.now() - t0 > 10_000) throw new Error("timed out: B's hello not asked again");
      await new Promise((r) => setTimeout(r, 20));
    }
    // Its authenticated hello says B seals its 101: still refused, and not asked again meanwhile.
    for (let i = 2; i < 5; i++) expect(await failure(c, `A-${i}`)).toEqual(REFUSED_MISSING);
    expect(hellos.n).toBe(1);
    expect(forwards).toEqual([]);
  });

  it("a peer noted as older that seals a 101 has the MAC required again at once", async () => {
    // B's last hello said nothing of the MAC (an older build); B has since been upgraded.
    const { url, forwards, hellos } = await realPeer(hmacAuth("B", SECRET));
    let strip = true;
    const stripped = new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]+`);
    const relay = await onPathUpgradeRelay(url, (head) => (strip ? head.replace(stripped, "") : head));
    closers.push(relay.close);
    const c = client();
    c.setPeer("B", relay.url);
    c.setChannelAcceptMac("B", false);
    // The control: while B counts as older, a 101 stripped of its MAC is taken unproven.
    await expect(c.forward("B", fwd("A-1"), () => {})).resolves.toMatchObject({ reqId: "A-1" });
    strip = false;
    c.setPeer("B", `${relay.url}/`); // a new channel: B seals its 101, and the MAC checks
    await expect(c.forward("B", fwd("A-2"), () => {})).resolves.toMatchObject({ reqId: "A-2" });
    // Switched back on by the MAC itself: no hello of B was read meanwhile.
    expect(hellos.n).toBe(0);
    strip = true;
    c.setPeer("B", relay.url); // another channel, whose 101 the path strips
    expect(await failure(c, "A-3")).toEqual(REFUSED_MISSING);
    expect(forwards).toEqual(["A-1", "A-2"]);
  });

  it("a peer that moves while its sealed 101 comes has the MAC required at its new address", async () => {
    const { url, forwards } = await realPeer(hmacAuth("B", SECRET));
    let strip = false;
    const stripped = new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]+`);
    const relay = await onPathUpgradeRelay(url, (head) => (strip ? head.replace(stripped, "") : head));
    closers.push(relay.close);
    const c = client();
    c.setPeer("B", relay.url);
    c.setChannelAcceptMac("B", false); // B's last hello was an older build's; it has been upgraded since
    const first = c.forward("B", fwd("A-1"), () => {});
    // B moves while that channel opens: its 101, with B's valid MAC, comes to the channel left behind.
    c.setPeer("B", `${relay.url}/`);
    await expect(first).rejects.toBeInstanceOf(TransportError);
    expect(relay.heads[0]).toMatch(new RegExp(`\\r\\n${HEADER_CHANNEL_MAC}: [0-9a-f]+`));
    strip = true;
    expect(await failure(c, "A-2")).toEqual(REFUSED_MISSING);
    expect(forwards).toEqual([]);
  });

  it("an older peer's 101 that does carry a MAC is still checked", async () => {
    const f = await forger(tagAs((b) => ({ ...b, server: "C" })));
    const c = client();
    c.setPeer("B", f.url);
    c.setChannelAcceptMac("B", false);
    expect(await failure(c, "A-1")).toEqual(REFUSED_WRONG);
  });

  it("insecure mode neither sends nor checks one (mTLS: TLS pinned to B's certificate proves its 101)", async () => {
    const { url, forwards } = await realPeer(insecureAuth("B"));
    const relay = await onPathUpgradeRelay(url);
    closers.push(relay.close);
    const c = client(insecureAuth("A"));
    c.setPeer("B", relay.url);
    await expect(c.forward("B", fwd("A-1"), () => {})).resolves.toMatchObject({ type: "result" });
    expect(forwards).toEqual(["A-1"]);
    expect(relay.heads[0]).not.toContain(HEADER_CHANNEL_MAC);
  });
});
