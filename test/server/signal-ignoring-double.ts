/** A test double shared by tests of engine steps that outlive their abort (tokenize-hang-up, retokenize). */
import type { Tokens } from "../../src/core/engine.js";
import { TestSimEngine } from "./helpers.js";

/**
 * Test double: the simulator's engine whose tokenize of a text `holds` picks ignores its signal and
 * waits until the test releases it; `held` keeps one release per waiting tokenize.
 */
export class SignalIgnoringDouble extends TestSimEngine {
  readonly held: (() => void)[] = [];

  constructor(private readonly holds: (text: string) => boolean) {
    super();
  }

  override async tokenize(text: string): Promise<Tokens> {
    if (this.holds(text)) await new Promise<void>((go) => this.held.push(go));
    return super.tokenize(text);
  }

  /** Lets every held tokenize go on. */
  release(): void {
    for (const go of this.held.splice(0)) go();
  }
}
