import { describe, expect, it } from "vitest";
import { StopAwareOutput } from "../../src/engines/output.js";

describe("StopAwareOutput", () => {
  it("holds back text that may start a stop string and cuts exactly before the stop", () => {
    const chunks: string[] = [];
    const out = new StopAwareOutput(["\n\nQ:"], (t) => chunks.push(t));
    expect(out.update("Answer")).toBe(false);
    expect(out.update("Answer B\n")).toBe(false);
    expect(chunks.join("")).toBe("Answer"); // the last 3 chars could begin "\n\nQ:"
    expect(out.update("Answer B\n\nQ: next")).toBe(true);
    expect(out.finish()).toBe("Answer B");
    expect(chunks.join("")).toBe("Answer B");
  });

  it("waits for incomplete UTF-8 and flushes everything on finish", () => {
    const chunks: string[] = [];
    const out = new StopAwareOutput([], (t) => chunks.push(t));
    out.update("caf\uFFFD");
    expect(chunks.join("")).toBe("caf");
    out.update("café");
    expect(out.finish("café!")).toBe("café!");
    expect(chunks.join("")).toBe("café!");
  });
});
