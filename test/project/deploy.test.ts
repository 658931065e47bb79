/**
 * The deployment files say only what the code does: every port, probe path, flag and PREFIXMESH_*
 * variable in the Dockerfile, the Kubernetes manifests, the systemd unit and docs/deploy.md exists in
 * the settings schema or the API's routes, and the pieces agree with each other (Services and probes
 * name the container's ports, the Secret holds each pod's certificate, the image runs what the build
 * makes).
 */
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Command } from "commander";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { parseAllDocuments } from "yaml";
import { registerNode } from "../../src/cli/node.js";
import { buildApi } from "../../src/server/api.js";
import { createMetrics } from "../../src/server/metrics.js";
import type { NodeService } from "../../src/server/service.js";
import { envName, OTHER_ENV, SETTING_KEYS, splitHostPort } from "../../src/server/settings/index.js";

const root = new URL("../../", import.meta.url);
const read = (path: string) => readFileSync(new URL(path, root), "utf8");
const exists = (path: string) => existsSync(new URL(path, root));

/** What the code accepts: the node command's flags, its variables, and the API's GET routes. */
const program = new Command("prefixmesh");
registerNode(program);
const NODE_FLAGS = new Set(program.commands[0]?.options.map((o) => o.long as string));
const VARIABLES = new Set([...SETTING_KEYS.map(envName), ...Object.keys(OTHER_ENV)]);

/** A test double of the node service: the routes are all this test needs of the API. */
const routesOnly = {
  nodeId: "A",
  modelId: "m",
  maxContextTokens: 1,
  tokenize: async () => new Uint32Array(),
  applyChatTemplate: async () => "",
  submit: async () => {
    throw new Error("not served in this test");
  },
  ready: () => ({ ok: true }),
  clusterView: () => ({}),
} as unknown as NodeService;
let api: FastifyInstance;
beforeAll(async () => {
  api = buildApi({ service: routesOnly, metrics: createMetrics("A") });
  await api.ready();
});
afterAll(() => api.close());
const isGetRoute = (path: string) => api.hasRoute({ method: "GET", url: path });

/** `--flag` words of a command line. */
const flagsIn = (words: string[]) =>
  words.filter((w) => /^--[a-z]/.test(w)).map((w) => w.split("=")[0] as string);

// biome-ignore lint/suspicious/noExplicitAny: manifests are untyped YAML walked by path
type Doc = any;
const manifests = readdirSync(new URL("deploy/k8s/", root))
  .filter((f) => f.endsWith(".yaml"))
  .map((f) => ({
    file: f,
    docs: parseAllDocuments(read(`deploy/k8s/${f}`)).map((d) => {
      expect(d.errors, f).toEqual([]);
      return d.toJS() as Doc;
    }),
  }));
const all = manifests.flatMap((m) => m.docs.map((d) => ({ file: m.file, doc: d })));
const byKind = (kind: string) => all.filter((x) => x.doc?.kind === kind).map((x) => x.doc);

describe("Kubernetes manifests (deploy/k8s)", () => {
  const [sts] = byKind("StatefulSet");
  const pod = sts?.spec.template.spec;
  const container = pod?.containers[0];
  const env = new Map<string, Doc>(container?.env.map((e: Doc) => [e.name, e]));
  const ports = new Map<string, number>(container?.ports.map((p: Doc) => [p.name, p.containerPort]));
  const ownCredentials = pod?.initContainers?.find((c: Doc) => c.name === "own-credentials");
  const allTls = pod?.volumes.find((v: Doc) => v.secret?.secretName === "prefixmesh-tls");
  const podIds = Array.from({ length: sts?.spec.replicas }, (_, i) => `${sts.metadata.name}-${i}`);

  test("parse, and hold one StatefulSet with a headless Service and a client Service", () => {
    expect(manifests.length).toBeGreaterThanOrEqual(4);
    expect(byKind("StatefulSet")).toHaveLength(1);
    const services = byKind("Service");
    const headless = services.find((s) => s.spec.clusterIP === "None");
    expect(headless?.metadata.name).toBe(sts.spec.serviceName);
    expect(headless?.spec.publishNotReadyAddresses).toBe(true);
    for (const s of services) {
      expect(s.spec.selector).toEqual(sts.spec.template.metadata.labels);
      for (const p of s.spec.ports)
        expect(ports.has(p.targetPort), `${s.metadata.name} ${p.targetPort}`).toBe(true);
    }
    expect(sts.spec.selector.matchLabels).toEqual(sts.spec.template.metadata.labels);
  });

  test("runs `prefixmesh node` with known variables only, listening on the container's ports", () => {
    expect(container.args[0]).toBe("node");
    for (const flag of flagsIn(container.args)) expect(NODE_FLAGS.has(flag), flag).toBe(true);
    for (const name of env.keys()) expect(VARIABLES.has(name), name).toBe(true);
    expect(splitHostPort(env.get("PREFIXMESH_LISTEN").value).port).toBe(ports.get("http"));
    expect(splitHostPort(env.get("PREFIXMESH_PEER_LISTEN").value).port).toBe(ports.get("peer"));
    // Node id = pod name, peers = the headless Service's records.
    expect(env.get("PREFIXMESH_ID").valueFrom.fieldRef.fieldPath).toBe("metadata.name");
    expect(env.get("PREFIXMESH_PEERS_DNS").value.split(".")[0]).toBe(sts.spec.serviceName);
  });

  test("probes: readiness on /ready, liveness on /health, on the API port", () => {
    expect(container.readinessProbe.httpGet.path).toBe("/ready");
    expect(container.livenessProbe.httpGet.path).toBe("/health");
    for (const probe of ["readinessProbe", "livenessProbe", "startupProbe"]) {
      const get = container[probe]?.httpGet;
      if (!get) continue;
      expect(isGetRoute(get.path), `${probe} ${get.path}`).toBe(true);
      expect(get.port, probe).toBe("http");
    }
  });

  test("credentials: a Secret with the CA certificate and each pod's certificate and key", () => {
    const kustomization = manifests.find((m) => m.file === "kustomization.yaml")?.docs[0];
    for (const r of kustomization.resources) expect(exists(`deploy/k8s/${r}`), r).toBe(true);
    const secret = kustomization.secretGenerator.find((s: Doc) => s.name === allTls.secret.secretName);
    const files = secret.files.map((f: string) => f.split("/").pop());
    expect(files.sort()).toEqual(
      ["ca.crt", ...podIds.flatMap((id) => [`node-${id}.crt`, `node-${id}.key`])].sort(),
    );
    expect(files).not.toContain("ca.key");
  });

  test("the node mounts only its own credentials, in memory, as --tls-dir; only the init container the Secret", () => {
    expect(container.volumeMounts.map((m: Doc) => m.name)).not.toContain(allTls.name);
    const mount = container.volumeMounts.find(
      (m: Doc) => m.mountPath === env.get("PREFIXMESH_TLS_DIR").value,
    );
    expect(mount.readOnly).toBe(true);
    expect(pod.volumes.find((v: Doc) => v.name === mount.name).emptyDir.medium).toBe("Memory");
    const copyMounts = new Map(ownCredentials.volumeMounts.map((m: Doc) => [m.name, m.mountPath]));
    expect(copyMounts.get(mount.name)).toBe(mount.mountPath);
    expect(copyMounts.has(allTls.name)).toBe(true);
    expect(ownCredentials.image).toBe(container.image);
    expect(ownCredentials.env.find((e: Doc) => e.name === "PREFIXMESH_ID").valueFrom).toEqual(
      env.get("PREFIXMESH_ID").valueFrom,
    );
  });

  /** Runs the init container's script with its two mounts moved under a temporary directory. */
  const runOwnCredentials = (id: string, secretFiles: string[]) => {
    const dir = mkdtempSync(join(tmpdir(), "pm-own-credentials-"));
    const secretDir = join(dir, "all-tls");
    const tlsDir = join(dir, "tls");
    mkdirSync(secretDir);
    mkdirSync(tlsDir);
    for (const f of secretFiles) writeFileSync(join(secretDir, f), `${f}\n`, { mode: 0o440 });
    const mountOf = (name: string) => ownCredentials.volumeMounts.find((m: Doc) => m.name === name).mountPath;
    const [sh, flag, script] = ownCredentials.command as string[];
    const moved = (script as string)
      .replaceAll(mountOf(allTls.name), secretDir)
      .replaceAll(mountOf("tls"), tlsDir);
    const run = spawnSync(sh as string, [flag as string, moved], {
      env: { PATH: process.env.PATH, PREFIXMESH_ID: id },
      encoding: "utf8",
    });
    const copied = readdirSync(tlsDir).sort();
    const modes = copied.map((f) => statSync(join(tlsDir, f)).mode & 0o777);
    rmSync(dir, { recursive: true, force: true });
    return { status: run.status, stderr: run.stderr, copied, modes };
  };

  test("the init container copies the pod's own three files at 0400 and no other pod's key", () => {
    const secretFiles = ["ca.crt", ...podIds.flatMap((id) => [`node-${id}.crt`, `node-${id}.key`])];
    const id = podIds[1] as string;
    const run = runOwnCredentials(id, secretFiles);
    expect(run.stderr).toBe("");
    expect(run.status).toBe(0);
    expect(run.copied).toEqual(["ca.crt", `node-${id}.crt`, `node-${id}.key`].sort());
    expect(run.modes).toEqual([0o400, 0o400, 0o400]);
  });

  test("a pod whose certificate is not in the Secret fails its init container, saying what to issue", () => {
    const run = runOwnCredentials(`${sts.metadata.name}-7`, ["ca.crt"]);
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain(`node-${sts.metadata.name}-7.crt`);
    expect(run.stderr).toContain(`certs issue --id ${sts.metadata.name}-7`);
  });

  test("Prometheus scrapes the API port's /metrics", () => {
    const annotations = sts.spec.template.metadata.annotations;
    expect(Number(annotations["prometheus.io/port"])).toBe(ports.get("http"));
    expect(isGetRoute(annotations["prometheus.io/path"])).toBe(true);
    const scrape = manifests.find((m) => m.file === "prometheus-scrape.yaml")?.docs[0];
    const job = scrape.scrape_configs[0];
    expect(isGetRoute(job.metrics_path)).toBe(true);
    const portRule = job.relabel_configs.find((r: Doc) =>
      r.source_labels.includes("__meta_kubernetes_pod_container_port_name"),
    );
    expect(ports.has(portRule.regex)).toBe(true);
  });

  test("gives the node at least its drain time to stop", () => {
    const drain = Number(env.get("PREFIXMESH_DRAIN_SEC")?.value ?? 20);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(drain);
  });
});

/** Dockerfile instructions, continuation lines joined, comments dropped. */
function dockerfile(text: string): { op: string; args: string }[] {
  const joined = text.replace(/\\\n/g, " ");
  return joined
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"))
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: (op as string).toUpperCase(), args: rest.join(" ") };
    });
}

describe("Dockerfile", () => {
  const steps = dockerfile(read("Dockerfile"));
  const of = (op: string) => steps.filter((s) => s.op === op);

  test("multi-stage, Debian-based, runs as the non-root node user", () => {
    const froms = of("FROM");
    expect(froms.length).toBeGreaterThanOrEqual(2);
    // Every stage on one base: the official Node 20 image unless BASE_IMAGE names another.
    expect(steps[0]).toEqual({ op: "ARG", args: "BASE_IMAGE=node:20-bookworm-slim" });
    for (const f of froms) expect(f.args).toMatch(/^\$\{BASE_IMAGE\} AS \w+$/);
    const last = steps.lastIndexOf(of("FROM").at(-1) as { op: string; args: string });
    const user = steps.slice(last).find((s) => s.op === "USER");
    expect(user?.args).toBe("node");
  });

  test("copies only what exists in the repository or an earlier stage", () => {
    const stages = of("FROM").map((f) => f.args.split(/\s+AS\s+/)[1]);
    for (const c of of("COPY")) {
      const words = c.args.split(/\s+/);
      const from = words.find((w) => w.startsWith("--from="))?.slice("--from=".length);
      const paths = words.filter((w) => !w.startsWith("--"));
      const sources = paths.slice(0, -1);
      if (from) {
        expect(stages, c.args).toContain(from);
        // What an earlier stage holds: its own copies, npm's node_modules, the build's dist.
        for (const s of sources) {
          const rel = s.replace(/^\/app\//, "");
          const made = rel.startsWith("node_modules") || rel.startsWith("dist");
          expect(made || exists(rel), s).toBe(true);
        }
      } else {
        for (const s of sources) expect(exists(s), s).toBe(true);
      }
    }
  });

  test("its build context leaves out local installs and credentials", () => {
    const ignored = read(".dockerignore")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l !== "" && !l.startsWith("#"));
    expect(ignored).toEqual(expect.arrayContaining(["node_modules", "dist", "deploy/k8s/tls"]));
    expect(read(".gitignore")).toContain("/deploy/k8s/tls/");
  });

  test("builds what it runs: the entry point is the CLI's, and the build stage compiles src/", () => {
    expect(of("RUN").map((r) => r.args)).toEqual(
      expect.arrayContaining(["npm ci", "npm run build", "npm ci --omit=dev"]),
    );
    const entry = JSON.parse(of("ENTRYPOINT")[0]?.args ?? "[]") as string[];
    expect(entry[0]).toBe("node");
    const script = (entry[1] as string).replace(/^\/app\//, "");
    expect(script).toBe("dist/cli/main.js");
    expect(exists(script.replace(/^dist\//, "src/").replace(/\.js$/, ".ts"))).toBe(true);
    const pkg = JSON.parse(read("package.json"));
    expect(pkg.bin.prefixmesh).toBe(script);
  });

  test("its variables are the node's, and it exposes the ports they listen on", () => {
    const env = new Map<string, string>();
    for (const e of of("ENV"))
      for (const m of e.args.matchAll(/(\w+)=(\S+)/g)) env.set(m[1] as string, m[2] as string);
    for (const name of env.keys())
      if (name.startsWith("PREFIXMESH_")) expect(VARIABLES.has(name), name).toBe(true);
    const exposed = of("EXPOSE").flatMap((e) => e.args.split(/\s+/).map(Number));
    expect(exposed.sort()).toEqual(
      [
        splitHostPort(env.get("PREFIXMESH_LISTEN") as string).port,
        splitHostPort(env.get("PREFIXMESH_PEER_LISTEN") as string).port,
      ].sort(),
    );
    const health = /fetch\('http:\/\/127\.0\.0\.1:(\d+)(\/[a-z]+)'\)/.exec(of("HEALTHCHECK")[0]?.args ?? "");
    expect(Number(health?.[1])).toBe(splitHostPort(env.get("PREFIXMESH_LISTEN") as string).port);
    expect(isGetRoute(health?.[2] as string)).toBe(true);
  });
});

describe("systemd unit and docs/deploy.md", () => {
  test("the unit runs the built CLI with known variables", () => {
    const unit = read("deploy/systemd/prefixmesh.service");
    const exec = /^ExecStart=(.*)$/m.exec(unit)?.[1]?.split(/\s+/) ?? [];
    expect(exec.slice(1, 3)).toEqual(["/opt/prefixmesh/dist/cli/main.js", "node"]);
    for (const flag of flagsIn(exec)) expect(NODE_FLAGS.has(flag), flag).toBe(true);
    const envFile = read("deploy/systemd/prefixmesh.env");
    const names = [
      ...unit.matchAll(/^Environment=(\w+)=/gm),
      ...envFile.matchAll(/^#?(PREFIXMESH_\w+)=/gm),
    ].map((m) => m[1] as string);
    expect(names.length).toBeGreaterThan(5);
    for (const n of names) if (n.startsWith("PREFIXMESH_")) expect(VARIABLES.has(n), n).toBe(true);
  });

  test("every flag of a `prefixmesh node` command and every variable in deploy.md exists", () => {
    const doc = read("docs/deploy.md");
    const nodeCommands = [...doc.matchAll(/prefixmesh(?::[\w.]+)? node((?:\\\n|[^\n])*)/g)].map((m) =>
      (m[1] as string).replace(/\\\n/g, " "),
    );
    expect(nodeCommands.length).toBeGreaterThan(2);
    for (const cmd of nodeCommands)
      for (const flag of flagsIn(cmd.split(/\s+/))) expect(NODE_FLAGS.has(flag), flag).toBe(true);
    for (const m of doc.matchAll(/\b(PREFIXMESH_[A-Z_]+)\b/g))
      expect(VARIABLES.has(m[1] as string), m[1]).toBe(true);
    for (const m of doc.matchAll(/GET (\/[a-z0-9/]+)/g)) expect(isGetRoute(m[1] as string), m[1]).toBe(true);
  });

  test("a containerised node with peers states --advertise (its own address is the container's)", () => {
    const doc = read("docs/deploy.md");
    const runs = [...doc.matchAll(/docker run((?:\\\n|[^\n])*)/g)].map((m) => (m[1] as string).split(/\s+/));
    const meshRuns = runs.filter((w) => flagsIn(w).some((f) => /^--(peers|join|peers-dns)$/.test(f)));
    expect(meshRuns.length).toBeGreaterThan(0);
    for (const w of meshRuns) expect(flagsIn(w)).toContain("--advertise");
  });
});
