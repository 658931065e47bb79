/**
 * State invariants, stated where the state lives. A broken invariant is a bug in this code, never a
 * bad input (bad input is refused and counted): it throws `InvariantError`, which nothing in the core
 * catches, so a test or a simulation run that breaks one fails loudly.
 *
 * `invariant` is for O(1) checks that stay on in production. Checks that cost more (a walk of a tree
 * or a queue) run only when a caller asks for them (`checkInvariants`: the simulator's invariant runs
 * and the tests).
 */
export class InvariantError extends Error {
  constructor(message: string) {
    super(`invariant violated: ${message}`);
    this.name = "InvariantError";
  }
}

/** Throws `InvariantError` unless `cond` holds. `msg` may be a function, to build the text only on failure. */
export function invariant(cond: unknown, msg: string | (() => string)): asserts cond {
  if (!cond) throw new InvariantError(typeof msg === "string" ? msg : msg());
}
