/**
 * What a shared-secret signature covers beyond the body: every x-prefixmesh-* header (changed,
 * removed, added or repeated on the path), the destination node, and the bound on signed headers.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ANY_DESTINATION,
  HEADER_DESTINATION,
  HEADER_SENDER,
  HEADER_SIGNATURE,
  PeerRequestVerifier,
  type signPeerRequest,
} from "../../src/net/auth/hmac.js";
import { body, secret, signed, T0 } from "./auth-hmac-fixtures.js";

/** A snapshot's headers as the transport sends them beside its bytes. */
const SNAPSHOT_HEADERS = {
  "content-type": "application/octet-stream",
  "x-prefixmesh-holds": "5:9",
  "x-prefixmesh-blocks": "3",
  "x-prefixmesh-at": "1795976827696.250",
  "x-prefixmesh-echo": "12.500:0.750",
};

/** What a server sees: the request's headers and the signature's, names lower-case. */
function received(sig: Record<string, string>, headers: Record<string, string> = SNAPSHOT_HEADERS) {
  return Object.fromEntries(Object.entries({ ...headers, ...sig }).map(([k, v]) => [k.toLowerCase(), v]));
}

describe("what a shared-secret signature covers", () => {
  const req = { method: "POST", path: "/peer/snapshot", body, now: T0 };
  const sigFor = (over: Partial<Parameters<typeof signPeerRequest>[0]> = {}) =>
    signed({ headers: SNAPSHOT_HEADERS, ...over });

  it("accepts the honest request with every x-prefixmesh-* header in place", () => {
    const v = new PeerRequestVerifier({ secret, self: "B" });
    expect(v.verify({ ...req, headers: received(sigFor()) })).toEqual({ ok: true, sender: "A" });
    // Header names are case-insensitive on the wire: signing with other cases changes nothing.
    const upper = { ...SNAPSHOT_HEADERS, "X-Prefixmesh-Holds": "5:9" } as Record<string, string>;
    delete upper["x-prefixmesh-holds"];
    expect(v.verify({ ...req, headers: received(signed({ headers: upper }), upper) }).ok).toBe(true);
  });

  it.each([
    ["x-prefixmesh-holds", "5:10"],
    ["x-prefixmesh-blocks", "4"],
    ["x-prefixmesh-at", "1795976827697.250"],
    ["x-prefixmesh-echo", "12.500:9.750"],
  ])("refuses a request whose %s was altered on the path", (name, forged) => {
    const v = new PeerRequestVerifier({ secret, self: "B" });
    const headers = { ...received(sigFor()), [name]: forged };
    expect(v.verify({ ...req, headers })).toEqual({ ok: false, reason: "bad-signature" });
  });

  it.each(["x-prefixmesh-holds", "x-prefixmesh-blocks", "x-prefixmesh-at", "x-prefixmesh-echo"])(
    "refuses a request whose %s was removed on the path",
    (name) => {
      const v = new PeerRequestVerifier({ secret, self: "B" });
      const headers = received(sigFor());
      delete headers[name];
      expect(v.verify({ ...req, headers })).toEqual({ ok: false, reason: "bad-signature" });
    },
  );

  it("refuses a request with an x-prefixmesh-* header added on the path, whatever its name", () => {
    const v = new PeerRequestVerifier({ secret, self: "B" });
    const none = signed(); // a request without the four snapshot headers
    for (const [name, value] of [
      ["x-prefixmesh-holds", "1:1"],
      ["x-prefixmesh-echo", "1.000:0.000"],
      ["x-prefixmesh-some-future-field", "1"],
    ] as const) {
      const headers = { ...received(none, {}), [name]: value };
      expect(v.verify({ ...req, headers })).toEqual({ ok: false, reason: "bad-signature" });
    }
    // Headers outside the prefix are not the signature's business (the body's digest is).
    const other = { ...received(none, {}), "user-agent": "x", "content-type": "text/plain" };
    expect(v.verify({ ...req, headers: other })).toEqual({ ok: true, sender: "A" });
  });

  it("refuses a header repeated on the path (Node joins the values)", () => {
    const v = new PeerRequestVerifier({ secret, self: "B" });
    const headers = { ...received(sigFor()), "x-prefixmesh-holds": "5:9, 6:1" };
    expect(v.verify({ ...req, headers })).toEqual({ ok: false, reason: "bad-signature" });
    const asArray = { ...received(sigFor()), "x-prefixmesh-blocks": ["3", "4"] };
    expect(v.verify({ ...req, headers: asArray })).toEqual({ ok: false, reason: "malformed" });
  });

  it("refuses a request for another node, and one whose destination was swapped", () => {
    const atC = new PeerRequestVerifier({ secret, self: "C" });
    const toB = received(sigFor());
    // Replayed as captured: C sees it was signed for B.
    expect(atC.verify({ ...req, headers: toB })).toEqual({ ok: false, reason: "wrong-destination" });
    // Its destination rewritten to C: the signature no longer matches.
    const swapped = { ...toB, [HEADER_DESTINATION]: "C" };
    expect(atC.verify({ ...req, headers: swapped })).toEqual({ ok: false, reason: "bad-signature" });
    // The wildcard only where the verifier's caller allows it (a hello), and not by rewriting.
    const wild = { ...toB, [HEADER_DESTINATION]: ANY_DESTINATION };
    expect(atC.verify({ ...req, headers: wild, anyDestination: true })).toEqual({
      ok: false,
      reason: "bad-signature",
    });
    const probe = received(sigFor({ destination: ANY_DESTINATION }));
    expect(atC.verify({ ...req, headers: probe })).toEqual({ ok: false, reason: "wrong-destination" });
    expect(atC.verify({ ...req, headers: probe, anyDestination: true }).ok).toBe(true);
    expect(atC.stats()).toMatchObject({ ok: 1, "wrong-destination": 2, "bad-signature": 2 });
  });

  it("names a request signed as protocol 1 did (no destination) for what it is", () => {
    const v = new PeerRequestVerifier({ secret, self: "B" });
    const { [HEADER_DESTINATION]: _gone, ...v1 } = received(sigFor());
    expect(v.verify({ ...req, headers: v1 })).toEqual({ ok: false, reason: "old-protocol" });
    const { [HEADER_SIGNATURE]: _sig, ...unsigned } = v1;
    expect(v.verify({ ...req, headers: unsigned })).toEqual({ ok: false, reason: "missing" });
  });

  it("refuses a replay to the same node, and keeps nonces per destination", () => {
    const v = new PeerRequestVerifier({ secret, self: "B" });
    const nonce = "fedcba9876543210fedc";
    const h = received(sigFor({ nonce }));
    expect(v.verify({ ...req, headers: h }).ok).toBe(true);
    expect(v.verify({ ...req, headers: h, now: T0 + 10 })).toEqual({ ok: false, reason: "replay" });
    // The same nonce in a probe (another destination) is another message, once.
    const probe = received(sigFor({ nonce, destination: ANY_DESTINATION }));
    expect(v.verify({ ...req, headers: probe, anyDestination: true }).ok).toBe(true);
    expect(v.verify({ ...req, headers: probe, anyDestination: true })).toEqual({
      ok: false,
      reason: "replay",
    });
    expect(v.remembered).toBe(2);
  });

  it("signs every x-prefixmesh-* header: any one changed, dropped or added fails (property)", () => {
    const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/).map((n) => `x-prefixmesh-f-${n}`);
    const value = fc.stringMatching(/^[!-~]([ -~]{0,20}[!-~])?$/);
    fc.assert(
      fc.property(
        fc.dictionary(name, value, { maxKeys: 8 }),
        fc.nat(),
        fc.constantFrom("change", "drop", "add"),
        value,
        (extra, pick, how, other) => {
          const v = new PeerRequestVerifier({ secret, self: "B" });
          const headers = { ...SNAPSHOT_HEADERS, ...extra };
          const h = received(signed({ headers }), headers);
          const names = Object.keys(h).filter((n) => n.startsWith("x-prefixmesh-") && n !== HEADER_SIGNATURE);
          const target = names[pick % names.length]!;
          const tampered: Record<string, string> = { ...h };
          if (how === "change") tampered[target] = tampered[target] === other ? `${other}0` : other;
          else if (how === "drop") delete tampered[target];
          else tampered["x-prefixmesh-added"] = other;
          const r = v.verify({ ...req, headers: tampered });
          expect(r.ok).toBe(false);
          expect(v.verify({ ...req, headers: h }).ok).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it("bounds the signed headers, and refuses to sign what a server would not see as sent", () => {
    const v = new PeerRequestVerifier({ secret, self: "B" });
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`x-prefixmesh-f${i}`, "1"]));
    expect(() => signed({ headers: many })).toThrow(/over 32/);
    expect(v.verify({ ...req, headers: { ...received(signed()), ...many } })).toEqual({
      ok: false,
      reason: "malformed",
    });
    expect(() => signed({ headers: { "x-prefixmesh-holds": " 5:9" } })).toThrow(/would not see/);
    expect(() => signed({ headers: { "x-prefixmesh-holds": "5:9\r\nx: y" } })).toThrow(/would not see/);
    expect(() => signed({ headers: { [HEADER_SENDER]: "C" } })).toThrow(/set by signing/);
    expect(() => signed({ destination: "not an id" })).toThrow(/invalid destination/);
    expect(() => new PeerRequestVerifier({ secret, self: "*" })).toThrow(/invalid node id/);
  });
});
