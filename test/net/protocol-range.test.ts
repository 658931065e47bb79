/** The protocol compatibility rule: every security mode × peer versions, for this build and a later one. */
import { describe, expect, it } from "vitest";
import {
  type AuthMode,
  acceptedRange,
  BUILD_RANGE,
  helloRange,
  type ProtocolRange,
  protocolCompatibility,
  SAFE_FLOOR,
} from "../../src/net/protocol-range.js";
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";

const MODES: AuthMode[] = ["hmac", "mtls", "insecure"];
const r = (min: number, max = min): ProtocolRange => ({ min, max });
/** "3" (talks at 3), "peer-too-old" or "node-too-old". */
const verdict = (mode: AuthMode, ours: ProtocolRange, theirs: ProtocolRange) => {
  const c = protocolCompatibility(mode, ours, theirs);
  return c.ok ? String(c.version) : c.reason;
};

describe("protocolCompatibility", () => {
  it("this build speaks 3 only, in every mode", () => {
    expect(BUILD_RANGE).toEqual(r(3));
    expect(PROTOCOL_VERSION).toBe(3);
    for (const mode of MODES) expect(acceptedRange(mode)).toEqual(r(3));
  });

  // Peer ranges as hellos give them; the same verdict in each mode (every floor is 3: protocol-range.ts).
  const thisBuild: [ProtocolRange, string][] = [
    [r(1), "peer-too-old"],
    [r(2), "peer-too-old"],
    [r(1, 2), "peer-too-old"],
    [r(3), "3"], // a node of the previous release (no minProtocol) or of this one
    [r(2, 3), "3"],
    [r(3, 4), "3"], // a later build that still speaks 3: the upgrade rolls
    [r(1, 5), "3"],
    [r(4), "node-too-old"],
    [r(4, 5), "node-too-old"],
  ];
  it.each(MODES.flatMap((m) => thisBuild.map(([theirs, want]) => [m, theirs, want] as const)))(
    "%s: this build and a peer speaking %o → %s",
    (mode, theirs, want) => {
      expect(verdict(mode, BUILD_RANGE, theirs)).toBe(want);
    },
  );

  // A later build speaking 3..4 against every peer range from 1 to 5: it talks at the newest shared one.
  it.each(MODES)("%s: a build speaking 3..4 talks at the newest version both speak", (mode) => {
    const later = r(3, 4);
    const table: [ProtocolRange, string][] = [
      [r(2), "peer-too-old"],
      [r(3), "3"],
      [r(4), "4"],
      [r(3, 5), "4"],
      [r(5), "node-too-old"],
    ];
    for (const [theirs, want] of table)
      expect(verdict(mode, later, theirs), `${theirs.min}..${theirs.max}`).toBe(want);
  });

  it("a build speaking 2..3 still refuses 2 in every mode: the floor is applied to ours too", () => {
    for (const mode of MODES) {
      expect(acceptedRange(mode, r(2, 3))).toEqual(r(SAFE_FLOOR[mode], 3));
      expect(verdict(mode, r(2, 3), r(2))).toBe("peer-too-old");
    }
    expect(() => acceptedRange("hmac", r(1, 2))).toThrow(/no protocol version of 1..2 is safe/);
  });

  it("names both ranges and what to do, with the mode's reason for an unsafe version", () => {
    const msg = (mode: AuthMode, theirs: ProtocolRange) => {
      const c = protocolCompatibility(mode, BUILD_RANGE, theirs);
      return c.ok ? "" : c.message;
    };
    expect(msg("hmac", r(2))).toBe(
      "speaks protocols 2..2, this node accepts 3..3 (a shared-secret mesh needs 3 or newer: older nodes' answers carry no response MAC): upgrade the peer",
    );
    expect(msg("mtls", r(2))).toMatch(
      /^speaks protocols 2\.\.2, this node accepts 3\.\.3 \(below 3, .*\): upgrade the peer$/,
    );
    expect(msg("insecure", r(1, 2))).toMatch(/several wire forms\): upgrade the peer$/);
    expect(msg("mtls", r(4, 5))).toBe(
      "speaks protocols 4..5, this node accepts 3..3: this node is too old for the peer, upgrade it",
    );
  });

  it("reads a hello without minProtocol as speaking its protocol only", () => {
    expect(helloRange({ protocol: 3 })).toEqual(r(3));
    expect(helloRange({ protocol: 4, minProtocol: 2 })).toEqual(r(2, 4));
    expect(() => protocolCompatibility("mtls", BUILD_RANGE, r(4, 3))).toThrow(/inverted/);
  });
});
