/**
 * Whether a peer's channel 101 answer must carry the channel MAC: what its (authenticated) hello said,
 * kept current as its 101s come in with the MAC or without it.
 */
import type { PeerEntry } from "./peer-pool.js";
import { helloSchema } from "./wire-schemas.js";

/**
 * A peer whose 101 came without the channel MAC although it was required is asked for its hello again
 * at most this often: its build may have changed since its hello was noted (rolled back to one before
 * the MAC, restarted without leaving), or none was noted (a static peer that never answered its first
 * check). The hello is authenticated (response MAC and proof of id), so a path that strips the MAC
 * only makes us read the peer's word again, which still says it seals its 101.
 */
export const ACCEPT_MAC_RECHECK_MS = 30_000;

/**
 * The peer's 101 carried its valid channel MAC: whatever its last hello said, it seals its 101s now
 * (it upgraded), so the MAC is required again at once, not at its next hello; a path stripping it
 * from a later 101 can no longer have that 101 taken unproven. The entry held now, not the
 * channel's: a peer moved while that channel opened has a new entry, which the MAC proves as well.
 */
export function acceptMacSeen(entry: PeerEntry | undefined): void {
  if (!entry) return;
  entry.acceptMac = true;
  entry.acceptMacSeenAt = Date.now();
}

/**
 * The peer's 101 lacked the channel MAC we required: read its (authenticated) hello again, and take
 * its 101s unproven from now on only if that hello does not say it seals them (an older build).
 */
export function recheckAcceptMac(
  id: string,
  entry: PeerEntry,
  held: (id: string) => PeerEntry | undefined,
  verifiedHello: (id: string) => Promise<unknown>,
): void {
  const now = Date.now();
  if (entry.acceptMacCheckedAt !== undefined && now - entry.acceptMacCheckedAt < ACCEPT_MAC_RECHECK_MS)
    return;
  entry.acceptMacCheckedAt = now;
  verifiedHello(id).then(
    (raw) => {
      const hello = helloSchema.safeParse(raw);
      // A whole hello of this id, for the peer still held (a move carries `acceptMacCheckedAt` over;
      // a peer removed and added again since starts afresh).
      const cur = held(id);
      if (!hello.success || hello.data.id !== id || cur?.acceptMacCheckedAt !== now) return;
      // A valid MAC seen since this hello was asked for is the newer word: it stays required.
      if (cur.acceptMacSeenAt !== undefined && cur.acceptMacSeenAt >= now) return;
      cur.acceptMac = hello.data.channelAcceptMac === true;
    },
    () => {}, // unreachable or garbled: the MAC stays required; asked again after the wait
  );
}
