/**
 * A member's incarnation after a check of it passed (admissions.ts): never above what the member
 * itself said in that check (its verified hello's `incarnation`). Only the member raises its own
 * incarnation, but a credentialed sender can say it is alive far above (within plausibleMax); the
 * check of the real, alive member then passes, and the claim held would make its own later records
 * (a refutation, a restart below the claim) old news until its incarnation passed the forged one.
 * Taken down to its own word, its next refutation (one more) is taken and its next life (two or more)
 * checked, as ever. No word (a node before it, the simulator, or a process not yet settled: swim.ts
 * `saidIncarnation`, so a restart's boot value, below its previous life's claims when its clock was
 * stepped back, is never read as a forgery of them): the claim stands for now, and a live member's new
 * life or a revival is checked once more after `recheckAfterChangeMs` (admissions.ts), so a forgery
 * told in a restart's first moments is taken down once the member has settled. A first admission is
 * not (no earlier life), nor a second silence (a node before own-word): that claim stands.
 */

/**
 * `held` after a passed check where the member said `own`: the lower, unless just one below. A claim
 * taken down is counted by the caller (`implausibleIncarnations`): news past what the member allows.
 */
export function ownWord(held: number, own: number | undefined): number {
  // The runtime validated it (a peer's hello): checked again, as any input, not trusted blindly.
  if (own === undefined || !Number.isSafeInteger(own) || own < 0) return held;
  // One below: the member refuted (one more) between its hello being read and the claim, not a forgery.
  return own + 1 >= held ? held : own;
}
