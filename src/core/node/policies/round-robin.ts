/** `round-robin`: cycles over the eligible nodes (self included), ignoring cache state. */
import { z } from "zod";
import { type Candidate, PEERS_ONLY, type Policy } from "./policy.js";

export const roundRobinConfig = z.object({}).strict();

export class RoundRobinPolicy implements Policy {
  readonly name = "round-robin";
  readonly needs = PEERS_ONLY;
  private cursor = 0;
  rank(candidates: readonly Candidate[]): number[] {
    // Order by id so the cycle is stable when the eligible set changes.
    const ids = candidates
      .map((c, i) => ({ id: c.id, i }))
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    const start = this.cursor++ % ids.length;
    const out: number[] = [];
    for (let k = 0; k < ids.length; k++) out.push((ids[(start + k) % ids.length] as { i: number }).i);
    return out;
  }
}
