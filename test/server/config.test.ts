import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { envName, resolveNodeSettings, SettingsError } from "../../src/server/settings/index.js";

describe("node settings: flags > PREFIXMESH_* env > YAML file", () => {
  const dir = mkdtempSync(join(tmpdir(), "pm-config-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };

  it("merges the three sources with the right precedence and fills defaults", () => {
    const cfg = file(
      "a.yaml",
      "id: fromfile\npoll-ms: 100\npolicy: local\npeers:\n  B: http://127.0.0.1:9001\n",
    );
    const s = resolveNodeSettings({ config: cfg, policy: "affinity" }, { [envName("pollMs")]: "250" });
    expect(s.id).toBe("fromfile");
    expect(s.pollMs).toBe(250);
    expect(s.policy).toBe("affinity");
    expect(s.peers).toEqual({ B: "http://127.0.0.1:9001" });
    expect(s.listen).toBe("127.0.0.1:8080");
    expect(envName("injectDelayMs")).toBe("PREFIXMESH_INJECT_DELAY_MS");
  });

  it("names the setting and its source in errors", () => {
    expect(() => resolveNodeSettings({}, {})).toThrow(/--id is required/);
    expect(() => resolveNodeSettings({ id: "A", pollMs: "soon" }, {})).toThrow(/--poll-ms/);
    expect(() => resolveNodeSettings({ id: "A" }, { PREFIXMESH_LISTEN: "nope" })).toThrow(
      /PREFIXMESH_LISTEN/,
    );
    expect(() => resolveNodeSettings({ id: "A", engine: "gpu" }, {})).toThrow(SettingsError);
    const typo = file("b.yaml", "id: A\npol-ms: 3\n");
    expect(() => resolveNodeSettings({ config: typo }, {})).toThrow(/unknown setting 'pol-ms'/);
    const bad = file("c.yaml", "id: [unclosed\n");
    expect(() => resolveNodeSettings({ config: bad }, {})).toThrow(/not valid YAML/);
    expect(() => resolveNodeSettings({ config: join(dir, "missing.yaml") }, {})).toThrow(
      /cannot read config file/,
    );
  });
});
