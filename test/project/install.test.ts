/**
 * The install stays lean and warning-free on Node 20: every locked package supports the Node version
 * package.json promises, node-llama-cpp's GPU and foreign builds are overridden by the empty
 * stand-in (so even `npm ci --omit=dev`, which replaces .npmrc's omit=optional, brings only the CPU
 * build), and the cookie override under fastify's inject still works.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import Fastify from "fastify";
import { describe, expect, test } from "vitest";

const root = new URL("../../", import.meta.url);
const pkg = JSON.parse(readFileSync(new URL("package.json", root), "utf8"));
const lock = JSON.parse(readFileSync(new URL("package-lock.json", root), "utf8")) as {
  packages: Record<
    string,
    { version?: string; engines?: { node?: string }; link?: boolean; resolved?: string }
  >;
};

type Version = [number, number, number];
const parse = (v: string): Version => {
  const m = /^v?(\d+)(?:\.(\d+|x|\*))?(?:\.(\d+|x|\*))?$/.exec(v.trim());
  if (!m) throw new Error(`unsupported version '${v}'`);
  const n = (s: string | undefined) => (s === undefined || s === "x" || s === "*" ? -1 : Number(s));
  return [Number(m[1]), n(m[2]), n(m[3])];
};
const cmp = (a: Version, b: Version): number => {
  for (let i = 0; i < 3; i++) {
    const d = (a[i] as number) - Math.max(0, b[i] as number);
    if (d !== 0) return d;
  }
  return 0;
};

/**
 * A deliberately small semver range check covering the forms found in the lock (`>=X`, `>= X`,
 * `^X`, `X.*`, a bare `X`, space-joined comparators and `||`): a form it does not know is an error,
 * so a new kind of range is looked at rather than passed.
 */
function satisfies(version: string, range: string): boolean {
  const v = parse(version);
  return range.split("||").some((alt) => {
    const parts = alt
      .trim()
      .replace(/(>=|<=|>|<|\^|~)\s+/g, "$1")
      .split(/\s+/);
    return parts.every((c) => {
      const op = /^(>=|<=|>|<|\^|~)?(.*)$/.exec(c);
      const want = parse(op?.[2] ?? "");
      const d = cmp(v, want);
      switch (op?.[1]) {
        case ">=":
          return d >= 0;
        case ">":
          return d > 0;
        case "<":
          return d < 0;
        case "<=":
          return d <= 0;
        case "^":
          return d >= 0 && v[0] === want[0];
        case "~":
          return d >= 0 && v[0] === want[0] && (want[1] < 0 || v[1] === want[1]);
        default:
          return want.every((w, i) => w < 0 || v[i] === w);
      }
    });
  });
}

describe("install", () => {
  test("the range check itself", () => {
    expect(satisfies("20.19.0", ">=22")).toBe(false);
    expect(satisfies("20.19.0", ">= 18")).toBe(true);
    expect(satisfies("20.19.0", "^20.19.0 || >=22.12.0")).toBe(true);
    expect(satisfies("20.18.0", "^20.19.0 || >=22.12.0")).toBe(false);
    expect(satisfies("20.19.0", "^16 || ^18 || >=20")).toBe(true);
    expect(satisfies("20.19.0", "6.* || 8.* || >= 10.*")).toBe(true);
    expect(satisfies("20.19.0", "^20.0.0 || ^22.0.0 || >=24.0.0")).toBe(true);
    expect(satisfies("20.19.0", ">=16 || 14 >=14.17")).toBe(true);
    expect(() => satisfies("20.19.0", ">=lts")).toThrow(/unsupported/);
  });

  test("every locked package supports the oldest Node that package.json accepts (no EBADENGINE)", () => {
    const oldest = /^>=(\d+\.\d+\.\d+)$/.exec(pkg.engines.node)?.[1];
    expect(oldest).toBeDefined();
    const bad = Object.entries(lock.packages)
      .filter(([, p]) => p.engines?.node !== undefined)
      .filter(([, p]) => !satisfies(oldest as string, p.engines?.node as string))
      .map(([k, p]) => `${k}@${p.version} wants node ${p.engines?.node}`);
    expect(bad).toEqual([]);
  });

  test("node-llama-cpp's only real build is the CPU one, whatever npm is told to omit", () => {
    const builds = Object.entries(lock.packages).filter(([k]) => k.includes("node_modules/@node-llama-cpp/"));
    expect(builds.length).toBeGreaterThan(1);
    for (const [k, p] of builds) {
      if (k === "node_modules/@node-llama-cpp/linux-x64") expect(p.link).toBeUndefined();
      else
        expect({ k, resolved: p.resolved, link: p.link }).toEqual({
          k,
          resolved: "deploy/no-gpu-build",
          link: true,
        });
    }
    // The stand-in is inert: a package.json and nothing to run.
    const standIn = new URL("deploy/no-gpu-build/", root);
    expect(readdirSync(standIn)).toEqual(["package.json"]);
    const manifest = JSON.parse(readFileSync(new URL("package.json", standIn), "utf8"));
    expect(manifest.scripts).toBeUndefined();
    expect(manifest.dependencies).toBeUndefined();
  });

  test("install scripts are declined: node-llama-cpp's CPU build, zeromq and msgpackr ship prebuilt", () => {
    // npm 11 blocks them (allowScripts); npm 10, which runs every script, is told by node-llama-cpp's
    // own package.json setting to skip it (it would otherwise probe for GPUs, maybe build from source),
    // and zeromq's only loads its prebuilt addon (it builds from source only when that fails).
    // msgpackr-extract's script only builds the addon its prebuilt optional package already holds
    // (installed where optional dependencies are, i.e. by `npm ci --omit=dev`).
    expect(pkg.allowScripts).toEqual({ "msgpackr-extract": false, "node-llama-cpp": false, zeromq: false });
    // Every locked package with an install script is decided on, so npm 11 warns about none.
    const scripted = Object.entries(lock.packages)
      .filter(([, p]) => (p as { hasInstallScript?: boolean }).hasInstallScript)
      .map(([path]) => path.slice(path.lastIndexOf("node_modules/") + "node_modules/".length));
    for (const name of scripted) expect(Object.keys(pkg.allowScripts), name).toContain(name);
    expect(pkg.config).toEqual({ nodeLlamaCppPostinstall: "skip" });
    expect(existsSync(new URL("node_modules/zeromq/build", root))).toBe(true);
  });

  test("fastify's inject still encodes cookies with the overridden cookie package", async () => {
    const app = Fastify();
    app.get("/echo", async (req) => ({ cookie: req.headers.cookie }));
    const res = await app.inject({ method: "GET", url: "/echo", cookies: { a: "1", b: "x y" } });
    await app.close();
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ cookie: "a=1; b=x%20y" });
  });
});
