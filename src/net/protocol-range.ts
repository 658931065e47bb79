/**
 * Which peer protocol versions two nodes can talk at, so an upgrade can roll: a hello says the newest
 * version its node speaks (`protocol`) and the oldest it still speaks (`minProtocol`; absent: only
 * `protocol`, as nodes before ranges say). Two nodes talk at the newest version both speak, and only
 * if that version is safe in the security mode they run in. Pure; checkPeerHello acts on it.
 *
 * An addition an older peer can ignore is announced by a hello field, not a new number: the previous
 * release compares numbers for equality, so a build saying 4 would split a mesh rolling from it. So the
 * shared-secret channel's 101 MAC (auth/channel-mac.ts) is the hello's `channelAcceptMac`: a peer whose
 * checked hello says it must send one (a missing or wrong one is refused), a peer whose hello does not
 * (an older build) has its 101 taken unproven, as before, until one of its 101s carries a valid MAC
 * (it upgraded) — its frames are MAC'd all the same, so a forged 101 can only make that channel fail. A
 * hello is itself authenticated (its response MAC, or TLS), so no one on the path can take the field away; a
 * peer not yet checked must send the MAC.
 */
import type { PeerAuth } from "./transport-auth.js";
import { PROTOCOL_VERSION } from "./transport-wire.js";

/** The wire's security mode (a lone node's is insecure). */
export type AuthMode = PeerAuth["mode"];

/** The oldest version this build still speaks: a newer build keeps the wire of every version it lists. */
export const MIN_PROTOCOL_VERSION = 3;

/**
 * Per mode, the oldest version that is safe there.
 * - hmac: 3. A node before 3 sends its HTTP answers without a response MAC (auth/response-mac.ts), so
 *   every answer of it fails our check, and it refuses our hello for its version.
 * - mtls, insecure: 3 too, though 3 changed nothing on their wire: nodes saying 2 were built over days
 *   in which the wire changed without a new number (the snapshot header's cost flag, a forward's cache
 *   namespace fields, cancels on the forward channel, the gossip codec's message types), so a hello
 *   saying 2 does not tell whether its node reads ours: the earliest refuse every snapshot of ours and
 *   drop a request's cache namespace.
 */
export const SAFE_FLOOR: Readonly<Record<AuthMode, number>> = { hmac: 3, mtls: 3, insecure: 3 };

/** Why a version under the mode's floor is refused (said to the operator). */
const FLOOR_WHY: Readonly<Record<AuthMode, string>> = {
  hmac: "a shared-secret mesh needs 3 or newer: older nodes' answers carry no response MAC",
  mtls: "below 3, one version number covered several wire forms",
  insecure: "below 3, one version number covered several wire forms",
};

/** Inclusive: every version from `min` to `max` is spoken. */
export interface ProtocolRange {
  readonly min: number;
  readonly max: number;
}

/** This build's versions, before any mode's floor. */
export const BUILD_RANGE: ProtocolRange = { min: MIN_PROTOCOL_VERSION, max: PROTOCOL_VERSION };

/** What this node accepts in `mode`: what its hello announces and `/cluster` shows. */
export function acceptedRange(mode: AuthMode, build: ProtocolRange = BUILD_RANGE): ProtocolRange {
  const min = Math.max(build.min, SAFE_FLOOR[mode]);
  if (min > build.max) throw new Error(`no protocol version of ${show(build)} is safe in mode ${mode}`);
  return { min, max: build.max };
}

/** A hello's range (its schema has checked minProtocol ≤ protocol). */
export function helloRange(h: { protocol: number; minProtocol?: number | undefined }): ProtocolRange {
  return { min: h.minProtocol ?? h.protocol, max: h.protocol };
}

export type Compatibility =
  | { ok: true; version: number }
  | { ok: false; reason: "peer-too-old" | "node-too-old"; message: string };

/**
 * Whether a node speaking `ours` talks to a peer speaking `theirs` in `mode`, and at which version:
 * the ranges must overlap in a version at or above the mode's floor.
 */
export function protocolCompatibility(
  mode: AuthMode,
  ours: ProtocolRange,
  theirs: ProtocolRange,
): Compatibility {
  if (theirs.min > theirs.max) throw new Error(`inverted protocol range ${theirs.min}..${theirs.max}`);
  const accepted = acceptedRange(mode, ours);
  const both = `speaks protocols ${show(theirs)}, this node accepts ${show(accepted)}`;
  if (theirs.max < accepted.min) {
    const why = theirs.max < SAFE_FLOOR[mode] ? ` (${FLOOR_WHY[mode]})` : "";
    return { ok: false, reason: "peer-too-old", message: `${both}${why}: upgrade the peer` };
  }
  if (theirs.min > accepted.max)
    return {
      ok: false,
      reason: "node-too-old",
      message: `${both}: this node is too old for the peer, upgrade it`,
    };
  return { ok: true, version: Math.min(accepted.max, theirs.max) };
}

function show(r: ProtocolRange): string {
  return `${r.min}..${r.max}`;
}
