import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";

/** CI must run exactly the README's test command, so the two are checked against each other. */
describe("README quickstart", () => {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");
  const ci = readFileSync(new URL("../../.ci/run", import.meta.url), "utf8");
  const quickstart = /## Quickstart[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
  const commands = quickstart
    .split("\n")
    .map((l) => l.replace(/#.*$/, "").trim())
    .filter((l) => l.length > 0);

  test("has exactly two commands", () => {
    expect(commands).toHaveLength(2);
  });

  test(".ci/run runs the README's test command verbatim", () => {
    const testCommand = commands.find((c) => c.includes("npm test"));
    expect(testCommand).toBeDefined();
    const ciLines = ci.split("\n").map((l) => l.trim());
    expect(ciLines).toContain(testCommand);
  });

  test("the main-job command names an npm script that exists", () => {
    const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8"));
    const main = commands.find((c) => !c.includes("npm test"));
    const script = /npm run ([\w:-]+)/.exec(main ?? "")?.[1];
    expect(script).toBeDefined();
    expect(pkg.scripts[script as string]).toBeDefined();
  });
});
