import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import { envName, flagName, OTHER_ENV, SETTING_KEYS, settingDoc } from "../../src/server/settings/index.js";
import { allowedValues, CONFIGURATION_DOC, renderConfigurationDoc } from "../../src/server/settings-doc.js";

const committed = readFileSync(new URL(`../../${CONFIGURATION_DOC}`, import.meta.url), "utf8");

describe("docs/configuration.md, generated from the settings schema", () => {
  test("the committed file is what the schema generates (else: npm run docs:config)", () => {
    expect(committed).toBe(renderConfigurationDoc());
  });

  test("every setting has a row with its flag, variable and meaning", () => {
    for (const key of SETTING_KEYS) {
      const doc = settingDoc(key);
      expect(doc.description.length, key).toBeGreaterThan(10);
      const row = committed.split("\n").find((l) => l.startsWith(`| \`${key}\` |`));
      expect(row, key).toBeDefined();
      expect(row).toContain(`\`${envName(key)}\``);
      if (doc.flag === false) expect(row).not.toContain(`\`${flagName(key)}\``);
      else expect(row).toContain(`\`${flagName(key)}\``);
      expect(allowedValues(key).length, key).toBeGreaterThan(0);
    }
    for (const name of Object.keys(OTHER_ENV)) expect(committed).toContain(`| \`${name}\` |`);
  });

  test("settings that once lived only in the source are documented", () => {
    for (const v of [
      "PREFIXMESH_BODY_LIMIT_BYTES",
      "PREFIXMESH_MAX_SNAPSHOT_BYTES",
      "PREFIXMESH_ENGINE_API_KEY",
    ])
      expect(committed).toContain(v);
    // The API key is never a flag: a command line is visible to every user of the machine.
    expect(settingDoc("engineApiKey").flag).toBe(false);
  });

  test("bounds come from the schema", () => {
    expect(allowedValues("maxPeers")).toBe("integer ≥ 1, ≤ 256");
    expect(allowedValues("forwardTimeoutMs")).toMatch(/^number > 0, ≤ /);
    expect(allowedValues("engine")).toBe("`llamacpp`, `openai`, `sim`");
    expect(allowedValues("insecure")).toMatch(/`true`, `false`/);
  });
});
