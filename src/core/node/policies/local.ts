/** `local`: never forward — the paper's no-routing baseline. */
import { z } from "zod";
import { type Candidate, type Policy, type PolicyNeeds, selfIndex } from "./policy.js";

export const localConfig = z.object({}).strict();

export class LocalPolicy implements Policy {
  readonly name = "local";
  /** Never forwards: the node builds no candidates beyond self (no index walk). */
  readonly needs: Readonly<PolicyNeeds> = Object.freeze({ peers: false, demand: false });
  rank(candidates: readonly Candidate[]): number[] {
    return [selfIndex(candidates)];
  }
}
