/**
 * The response MAC by itself: an answer sealed for one signed request opens only as sent, in order,
 * for that request (its nonce, sender and destination), and never for another.
 */
import { describe, expect, it } from "vitest";
import { signPeerRequest } from "../../src/net/auth/hmac.js";
import { HEADER_RESPONSE_MAC, responseOpener, responseSealer } from "../../src/net/auth/response-mac.js";
import { SECRET } from "./fixtures.js";

const request = (o: { sender?: string; destination?: string; nonce?: string } = {}) =>
  signPeerRequest({
    secret: SECRET,
    sender: o.sender ?? "A",
    destination: o.destination ?? "B",
    method: "POST",
    path: "/peer/forward",
    body: "{}",
    now: 1_000_000,
    nonce: o.nonce ?? "0123456789abcdef",
  });

/** B's answer to `req`: a head with epoch 7 and two records. */
function answer(req = request()) {
  const s = responseSealer(SECRET, req);
  const headers: Record<string, string> = {
    "content-type": "application/x-ndjson",
    "x-prefixmesh-epoch": "7",
  };
  headers[HEADER_RESPONSE_MAC] = s.head(200, headers);
  return { headers, lines: [s.record('{"t":"chunk","text":"he"}'), s.record('{"t":"msg"}')] };
}

describe("response MAC", () => {
  it("opens the answer as sent, for the request it answers", () => {
    const a = answer();
    const o = responseOpener(SECRET, request());
    expect(o.head(200, a.headers)).toBe(true);
    expect(a.lines.map((l) => o.record(l))).toEqual(['{"t":"chunk","text":"he"}', '{"t":"msg"}']);
  });

  it("refuses another status, an altered, added or dropped x-prefixmesh-* header", () => {
    const a = answer();
    const { "x-prefixmesh-epoch": _, ...dropped } = a.headers;
    for (const [status, h] of [
      [201, a.headers],
      [200, { ...a.headers, "x-prefixmesh-epoch": "8" }],
      [200, { ...a.headers, "x-prefixmesh-hops": "1" }],
      [200, dropped],
    ] as const)
      expect(responseOpener(SECRET, request()).head(status, h)).toBe(false);
    // Headers outside the prefix are not its business.
    expect(responseOpener(SECRET, request()).head(200, { ...a.headers, "content-type": "text/plain" })).toBe(
      true,
    );
  });

  it("refuses records altered, reordered, or without the head before them", () => {
    const a = answer();
    const altered = responseOpener(SECRET, request());
    altered.head(200, a.headers);
    expect(altered.record(a.lines[0]!.replace('"he"', '"HE"'))).toBeUndefined();
    const swapped = responseOpener(SECRET, request());
    swapped.head(200, a.headers);
    expect(swapped.record(a.lines[1]!)).toBeUndefined();
    expect(responseOpener(SECRET, request()).record(a.lines[0]!)).toBeUndefined();
  });

  it("refuses an answer to another request: another nonce, sender or destination, or another secret", () => {
    const a = answer();
    for (const other of [
      request({ nonce: "fedcba9876543210" }),
      request({ sender: "C" }),
      request({ destination: "C" }),
    ])
      expect(responseOpener(SECRET, other).head(200, a.headers)).toBe(false);
    expect(responseOpener(Buffer.alloc(32, 9), request()).head(200, a.headers)).toBe(false);
  });

  it("covers a whole body by its digest", () => {
    const s = responseSealer(SECRET, request());
    const tag = s.head(200, {}, '{"id":"B"}');
    const h = { [HEADER_RESPONSE_MAC]: tag };
    expect(responseOpener(SECRET, request()).head(200, h, Buffer.from('{"id":"B"}'))).toBe(true);
    expect(responseOpener(SECRET, request()).head(200, h, Buffer.from('{"id":"C"}'))).toBe(false);
    expect(responseOpener(SECRET, request()).head(200, h)).toBe(false);
  });
});
