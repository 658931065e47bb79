/** `local`: never forward — the paper's no-routing baseline. */
import { type Candidate, type Policy, selfIndex } from "./policy.js";

export class LocalPolicy implements Policy {
  readonly name = "local";
  readonly localOnly = true;
  rank(candidates: readonly Candidate[]): number[] {
    return [selfIndex(candidates)];
  }
}
