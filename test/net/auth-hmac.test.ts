import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ANY_DESTINATION,
  HEADER_DESTINATION,
  HEADER_NONCE,
  HEADER_SENDER,
  HEADER_SIGNATURE,
  HEADER_TIMESTAMP,
  PeerRequestVerifier,
  signPeerRequest,
} from "../../src/net/auth/hmac.js";
import { ReplayCache } from "../../src/net/auth/replay-cache.js";
import {
  generateSecret,
  loadSecretFile,
  parseSecret,
  SecretError,
  writeSecretFile,
} from "../../src/net/auth/secret.js";
import { checkSecurityMode, SecurityModeError } from "../../src/net/auth/security-mode.js";

const secret = parseSecret(generateSecret());
const T0 = 1_800_000_000_000;
const body = new TextEncoder().encode('{"snapshot":1}');

function signed(over: Partial<Parameters<typeof signPeerRequest>[0]> = {}) {
  return signPeerRequest({
    secret,
    sender: "A",
    destination: "B",
    method: "POST",
    path: "/peer/snapshot",
    body,
    now: T0,
    ...over,
  });
}

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

describe("secrets", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "pm-secret-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("parses hex and base64 of at least 32 bytes", () => {
    expect(parseSecret("ab".repeat(32)).length).toBe(32);
    expect(parseSecret(` ${Buffer.alloc(40, 7).toString("base64")}\n`).length).toBe(40);
    expect(parseSecret(Buffer.alloc(33, 250).toString("base64url")).length).toBe(33);
    expect(() => parseSecret("ab".repeat(16))).toThrow(/16 bytes; at least 32/);
    expect(() => parseSecret("password123!")).toThrow(SecretError);
    expect(() => parseSecret("")).toThrow(/empty/);
  });

  it("writes a 0600 secret file, refuses to overwrite it, and loads it", async () => {
    const f = join(dir, "secret");
    await writeSecretFile(f);
    expect((await stat(f)).mode & 0o777).toBe(0o600);
    await expect(writeSecretFile(f)).rejects.toThrow(/already exists/);
    expect((await loadSecretFile(f)).length).toBe(32);
    const weak = join(dir, "weak");
    await writeFile(weak, "hunter2");
    await expect(loadSecretFile(weak)).rejects.toThrow(/weak: /);
    await expect(loadSecretFile(join(dir, "absent"))).rejects.toThrow(/not found/);
    const big = join(dir, "big");
    await writeFile(big, "a".repeat(10_000));
    await expect(loadSecretFile(big)).rejects.toThrow(/too large/);
  });
});

describe("checkSecurityMode (the insecure guard)", () => {
  const httpPeers = [{ id: "B", url: "http://127.0.0.1:9002" }];
  const httpsPeers = [{ id: "B", url: "https://127.0.0.1:9002" }];

  it("refuses a multi-node cluster with neither mTLS nor a secret", () => {
    expect(() => checkSecurityMode({ peers: httpPeers, insecure: false })).toThrow(SecurityModeError);
    expect(() => checkSecurityMode({ peers: [], peersDns: "pm.svc", insecure: false })).toThrow(/--insecure/);
  });

  it("allows it with an explicit insecure flag, mTLS or a secret", () => {
    expect(checkSecurityMode({ peers: httpPeers, insecure: true })).toBe("insecure");
    expect(checkSecurityMode({ peers: httpsPeers, tls: {}, insecure: false })).toBe("mtls");
    expect(checkSecurityMode({ peers: httpPeers, secret: new Uint8Array(32), insecure: false })).toBe(
      "shared-secret",
    );
    expect(checkSecurityMode({ peers: [], insecure: false })).toBe("single-node");
  });

  it("refuses mTLS and a secret together: the secret would never be used", () => {
    expect(() => checkSecurityMode({ peers: httpsPeers, tls: {}, secret: "s", insecure: false })).toThrow(
      /--tls-dir and --secret-file were both given/,
    );
    expect(() => checkSecurityMode({ peers: [], tls: {}, secret: "s", insecure: false })).toThrow(
      SecurityModeError,
    );
    // The http:// peers of a shared-secret cluster that added --tls-dir: told of the pair, not of the URLs.
    expect(() => checkSecurityMode({ peers: httpPeers, tls: {}, secret: "s", insecure: false })).toThrow(
      /--tls-dir and --secret-file were both given/,
    );
  });

  it("requires https peer URLs with mTLS and http without a CA", () => {
    expect(() => checkSecurityMode({ peers: httpPeers, tls: {}, insecure: false })).toThrow(/must be https/);
    expect(() => checkSecurityMode({ peers: httpsPeers, secret: "s", insecure: false })).toThrow(
      /no cluster CA/,
    );
  });
});
