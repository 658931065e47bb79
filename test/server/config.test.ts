import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  envName,
  OTHER_ENV,
  resolveNodeSettings,
  SETTING_KEYS,
  SettingsError,
} from "../../src/server/settings/index.js";

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

describe("PREFIXMESH_* variables", () => {
  it("refuses an unknown one, naming it and the closest known name", () => {
    expect(() => resolveNodeSettings({ id: "A" }, { PREFIXMESH_POL_MS: "200" })).toThrow(
      /unknown environment variable PREFIXMESH_POL_MS; did you mean PREFIXMESH_POLL_MS\?/,
    );
    expect(() => resolveNodeSettings({ id: "A" }, { PREFIXMESH_ZZZZZZZZZZZZZZZZ: "1" })).toThrow(
      SettingsError,
    );
    // No suggestion when nothing is near.
    expect(() => resolveNodeSettings({ id: "A" }, { PREFIXMESH_ZZZZZZZZZZZZZZZZ: "1" })).not.toThrow(
      /did you mean/,
    );
  });

  it("accepts every setting's variable, the other documented ones, and unrelated variables", () => {
    const env: Record<string, string> = { PREFIXMESH_POLL_MS: "200", PREFIXMESHX: "1", OTHER: "x" };
    for (const name of Object.keys(OTHER_ENV)) env[name] = "1";
    delete env.PREFIXMESH_CONFIG;
    expect(resolveNodeSettings({ id: "A" }, env).pollMs).toBe(200);
  });

  it("ignores the variables Kubernetes links a Service named prefixmesh by (deploy/k8s)", () => {
    // Every pod gets <SERVICE>_SERVICE_HOST, _PORT, _PORT_<n>_TCP… for each Service (enableServiceLinks).
    const env = {
      PREFIXMESH_SERVICE_HOST: "10.0.0.7",
      PREFIXMESH_SERVICE_PORT: "8080",
      PREFIXMESH_SERVICE_PORT_HTTP: "8080",
      PREFIXMESH_PORT: "tcp://10.0.0.7:8080",
      PREFIXMESH_PORT_8080_TCP: "tcp://10.0.0.7:8080",
      PREFIXMESH_PORT_8080_TCP_PROTO: "tcp",
      PREFIXMESH_PORT_8080_TCP_PORT: "8080",
      PREFIXMESH_PORT_8080_TCP_ADDR: "10.0.0.7",
      PREFIXMESH_PEERS_SERVICE_HOST: "10.0.0.8",
      PREFIXMESH_PEERS_PORT_9080_TCP: "tcp://10.0.0.8:9080",
    };
    expect(resolveNodeSettings({ id: "A" }, env).id).toBe("A");
    // A setting's own variable is still read, and a misspelt one still refused.
    expect(() => resolveNodeSettings({ id: "A" }, { ...env, PREFIXMESH_POL_MS: "1" })).toThrow(
      /PREFIXMESH_POL_MS/,
    );
  });

  it("knows every PREFIXMESH_* name the repository uses (code, tests, scripts, deploy files, docs)", () => {
    const known = new Set([...SETTING_KEYS.map(envName), ...Object.keys(OTHER_ENV)]);
    const root = join(import.meta.dirname, "../..");
    const files: string[] = ["README.md", "BENCHMARKS.md", "Dockerfile"].map((f) => join(root, f));
    const walk = (d: string): void => {
      for (const e of readdirSync(d)) {
        const p = join(d, e);
        if (statSync(p).isDirectory()) walk(p);
        // This file names misspelt ones on purpose.
        else if (p !== import.meta.filename && /\.(ts|mjs|js|sh|md|ya?ml|env|service)$|^run$/.test(e))
          files.push(p);
      }
    };
    for (const d of ["src", "test", "scripts", "deploy", "docs", ".ci"]) walk(join(root, d));
    const used = new Set<string>();
    for (const f of files)
      for (const m of readFileSync(f, "utf8").matchAll(/PREFIXMESH_[A-Z0-9_]*[A-Z0-9]/g)) used.add(m[0]);
    expect(used.size).toBeGreaterThan(10);
    expect([...used].filter((n) => !known.has(n))).toEqual([]);
  });
});
