/**
 * Shared-secret request signing: a valid request is accepted once; tampering, a wrong secret, stale
 * clocks, replays and malformed headers are refused; and the replay cache stays bounded.
 */
import { describe, expect, it } from "vitest";
import {
  HEADER_DESTINATION,
  HEADER_NONCE,
  HEADER_SENDER,
  HEADER_SIGNATURE,
  HEADER_TIMESTAMP,
  PeerRequestVerifier,
} from "../../src/net/auth/hmac.js";
import { ReplayCache } from "../../src/net/auth/replay-cache.js";
import { generateSecret, parseSecret } from "../../src/net/auth/secret.js";
import { body, secret, signed, T0 } from "./auth-hmac-fixtures.js";

describe("shared-secret request signing", () => {
  it("accepts a valid request once and names the sender", () => {
    const v = new PeerRequestVerifier({ secret, self: "B" });
    const headers = signed();
    expect(Object.keys(headers).sort()).toEqual(
      [HEADER_DESTINATION, HEADER_NONCE, HEADER_SENDER, HEADER_SIGNATURE, HEADER_TIMESTAMP].sort(),
    );
    expect(v.verify({ method: "POST", path: "/peer/snapshot", headers, body, now: T0 + 1000 })).toEqual({
      ok: true,
      sender: "A",
    });
    // lower-case method on either side is the same request
    const h2 = signed({ method: "post" });
    expect(v.verify({ method: "POST", path: "/peer/snapshot", headers: h2, body, now: T0 }).ok).toBe(true);
  });

  it("rejects tampered body, path, method and sender", () => {
    const v = new PeerRequestVerifier({ secret, self: "B" });
    const base = { method: "POST", path: "/peer/snapshot", body, now: T0 };
    const tampered = new TextEncoder().encode('{"snapshot":2}');
    expect(v.verify({ ...base, headers: signed(), body: tampered })).toEqual({
      ok: false,
      reason: "bad-signature",
    });
    expect(v.verify({ ...base, headers: signed(), path: "/peer/forward" })).toEqual({
      ok: false,
      reason: "bad-signature",
    });
    expect(v.verify({ ...base, headers: signed(), method: "PUT" })).toEqual({
      ok: false,
      reason: "bad-signature",
    });
    expect(v.verify({ ...base, headers: { ...signed(), [HEADER_SENDER]: "B" } })).toEqual({
      ok: false,
      reason: "bad-signature",
    });
    expect(v.verify({ ...base, headers: signed(), body: undefined })).toEqual({
      ok: false,
      reason: "bad-signature",
    });
  });

  it("rejects a wrong secret", () => {
    const v = new PeerRequestVerifier({ secret: parseSecret(generateSecret()), self: "B" });
    expect(v.verify({ method: "POST", path: "/peer/snapshot", headers: signed(), body, now: T0 })).toEqual({
      ok: false,
      reason: "bad-signature",
    });
  });

  it("rejects stale and future timestamps outside the window", () => {
    const v = new PeerRequestVerifier({ secret, self: "B", windowMs: 30_000 });
    const req = { method: "POST", path: "/peer/snapshot", body };
    // Outside the window: the refusal says the verifier's clock, so the sender can name its skew.
    expect(v.verify({ ...req, headers: signed(), now: T0 + 30_001 })).toEqual({
      ok: false,
      reason: "stale",
      clockMs: T0 + 30_001,
    });
    expect(v.verify({ ...req, headers: signed(), now: T0 - 30_001 })).toEqual({
      ok: false,
      reason: "stale",
      clockMs: T0 - 30_001,
    });
    expect(v.verify({ ...req, headers: signed(), now: T0 + 30_000 }).ok).toBe(true);
  });

  it("rejects a replayed request, even with a new timestamp inside the window", () => {
    const v = new PeerRequestVerifier({ secret, self: "B" });
    const headers = signed({ nonce: "0123456789abcdef0123" });
    const req = { method: "POST", path: "/peer/snapshot", headers, body };
    expect(v.verify({ ...req, now: T0 }).ok).toBe(true);
    expect(v.verify({ ...req, now: T0 + 5 })).toEqual({ ok: false, reason: "replay" });
    // the same nonce from another sender is a different message
    const fromB = signed({ nonce: "0123456789abcdef0123", sender: "B" });
    expect(v.verify({ ...req, headers: fromB, now: T0 }).ok).toBe(true);
    expect(v.stats()).toMatchObject({ ok: 2, replay: 1 });
  });

  it("rejects missing and malformed headers without throwing", () => {
    const v = new PeerRequestVerifier({ secret, self: "B" });
    const req = { method: "POST", path: "/peer/snapshot", body, now: T0 };
    const h = signed();
    const { [HEADER_NONCE]: _dropped, ...noNonce } = h;
    expect(v.verify({ ...req, headers: noNonce })).toEqual({ ok: false, reason: "missing" });
    expect(v.verify({ ...req, headers: {} })).toEqual({ ok: false, reason: "missing" });
    expect(v.verify({ ...req, headers: { ...h, [HEADER_SIGNATURE]: "zz" } })).toEqual({
      ok: false,
      reason: "malformed",
    });
    expect(v.verify({ ...req, headers: { ...h, [HEADER_TIMESTAMP]: "12abc" } })).toEqual({
      ok: false,
      reason: "malformed",
    });
    expect(v.verify({ ...req, headers: { ...h, [HEADER_SENDER]: ["A", "B"] } })).toEqual({
      ok: false,
      reason: "malformed",
    });
    expect(v.verify({ ...req, headers: { ...h, [HEADER_NONCE]: "x".repeat(10_000) } })).toEqual({
      ok: false,
      reason: "malformed",
    });
    expect(v.verify({ ...req, headers: { ...h, [HEADER_SENDER]: "A\nB" } })).toEqual({
      ok: false,
      reason: "malformed",
    });
    expect(v.verify({ ...req, path: "/a\nb", headers: h })).toEqual({ ok: false, reason: "malformed" });
  });

  it("keeps the nonce cache bounded without opening a replay", () => {
    const v = new PeerRequestVerifier({ secret, self: "B", maxNonces: 3 });
    const req = { method: "POST", path: "/p", body };
    const first = signed({ path: "/p" });
    expect(v.verify({ ...req, headers: first, now: T0 }).ok).toBe(true);
    for (let i = 1; i <= 5; i++) {
      const h = signed({ path: "/p", now: T0 + i });
      expect(v.verify({ ...req, headers: h, now: T0 + i }).ok).toBe(true);
    }
    // `first` was evicted from the cache; it must still not be accepted again
    expect(v.verify({ ...req, headers: first, now: T0 + 6 })).toEqual({ ok: false, reason: "stale" });
  });

  it("refuses secrets shorter than 32 bytes", () => {
    expect(() => new PeerRequestVerifier({ secret: new Uint8Array(16), self: "B" })).toThrow(
      /at least 32 bytes/,
    );
    expect(() => signed({ secret: new Uint8Array(31) })).toThrow(/at least 32 bytes/);
    expect(() => signed({ sender: "bad id" })).toThrow(/invalid sender/);
  });
});

describe("ReplayCache", () => {
  it("forgets entries outside the window and raises its floor when it does", () => {
    const c = new ReplayCache(1000, 100);
    c.add("a", 0, 0);
    c.add("b", 500, 500);
    expect(c.has("a")).toBe(true);
    c.add("c", 1200, 1200);
    expect(c.has("a")).toBe(false);
    expect(c.has("b")).toBe(true);
    expect(c.floor).toBe(0);
    expect(c.size).toBe(2);
  });
});
