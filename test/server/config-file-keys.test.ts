/** The YAML file's keys: one setting given twice (camelCase and kebab-case) or misspelt is refused. */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { resolveNodeSettings, SettingsError } from "../../src/server/settings/index.js";

describe("config file keys", () => {
  const dir = mkdtempSync(join(tmpdir(), "pm-config-keys-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  const problem = (text: string, name: string) => {
    try {
      resolveNodeSettings({ config: file(name, text) }, {});
    } catch (err) {
      return err;
    }
    return undefined;
  };

  it("refuses one setting given in both spellings, naming both, rather than keep the last", () => {
    const err = problem("id: A\nengine: sim\npoll-ms: 100\npollMs: 200\n", "twice.yaml");
    expect(err).toBeInstanceOf(SettingsError);
    expect((err as Error).message).toMatch(/twice\.yaml/);
    expect((err as Error).message).toMatch(/'poll-ms' and 'pollMs'/);
  });

  it("still takes each setting once in either spelling", () => {
    const s = resolveNodeSettings(
      { config: file("once.yaml", "id: A\nengine: sim\npoll-ms: 100\nmaxPending: 7\n") },
      {},
    );
    expect(s.pollMs).toBe(100);
    expect(s.maxPending).toBe(7);
  });

  it("names the closest known key for a misspelt one", () => {
    const err = problem("id: A\nengine: sim\npol-ms: 100\n", "typo.yaml");
    expect(err).toBeInstanceOf(SettingsError);
    expect((err as Error).message).toMatch(/unknown setting 'pol-ms'; did you mean 'poll-ms'\?/);
  });

  it("answers a huge unknown key at once, quoting a bounded part of it", () => {
    const t0 = Date.now();
    const err = problem(`id: A\nengine: sim\n${"x".repeat(500_000)}: 1\n`, "huge.yaml");
    expect(err).toBeInstanceOf(SettingsError);
    expect((err as Error).message.length).toBeLessThan(400);
    expect((err as Error).message).not.toMatch(/did you mean/);
    expect(Date.now() - t0).toBeLessThan(2_000);
  });
});
