/**
 * The faults report describes each class with the `prefixmesh sim` flags that replay it: parsed as the
 * sim command parses them, those flags give the very faults the class runs (a link fault's end
 * included), so a reader can rerun one class alone.
 */
import { describe, expect, it } from "vitest";
import { parseFaultFlags, type SimFaultOptions } from "../../src/cli/sim-faults.js";
import { type ClassContext, FAULT_CLASSES } from "../../src/experiments/faults/classes.js";

/** The sim flags a class's description ends with, as the sim command's parsed options. */
function replayedOptions(what: string): SimFaultOptions {
  const m = /\((--[^()]*)\)$/.exec(what);
  if (!m?.[1]) throw new Error(`no flags at the end of: ${what}`);
  const o: Record<string, string | string[]> = {};
  const words = m[1].split(/\s+/).filter((w) => w !== "");
  let key: string | undefined;
  for (const w of words) {
    if (w.startsWith("--")) {
      key = w.slice(2).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
      continue;
    }
    if (key === undefined) throw new Error(`a value before any flag in: ${what}`);
    // Repeatable flags are lists; the others take one value.
    const prev = o[key];
    if (["crash", "partition", "slowNode", "stall", "refuse", "lie", "pause"].includes(key))
      o[key] = [...((prev as string[] | undefined) ?? []), w];
    else o[key] = w;
  }
  return o as SimFaultOptions;
}

const ctx: ClassContext = {
  spanMs: 3_081_563,
  requests: 10_000,
  promptTokens: () => 700,
  chatMaxTokensDefault: 512,
};

describe("fault classes' replay flags", () => {
  const replayable = FAULT_CLASSES.filter(
    (c) => !["lying-peer", "unbounded", "unbounded-api"].includes(c.id),
  );

  it("cover the classes that run simulator faults alone", () => {
    expect(replayable.map((c) => c.id)).toEqual(expect.arrayContaining(["loss-5", "loss-30", "reordering"]));
  });

  for (const c of replayable) {
    it(`${c.id}: the flags in its description give the faults it runs`, () => {
      const setup = c.setup(ctx);
      const parsed = parseFaultFlags(replayedOptions(setup.what), 4, 1);
      expect(parsed).toEqual(setup.faults);
    });
  }
});
