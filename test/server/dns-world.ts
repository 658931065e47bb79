/**
 * A fake world for DnsMembership tests (dns-membership.test.ts): an injected resolver and fake ports
 * whose addresses answer hellos as told. Test doubles only.
 */
import { PROTOCOL_VERSION } from "../../src/net/transport-wire.js";
import { DnsMembership, type DnsMembershipPorts } from "../../src/server/runtime/dns-membership.js";
import { waitFor } from "../e2e/helpers.js";

const quiet = { info() {}, warn() {}, error() {}, debug() {} };
export const EXPECT = { cluster: "c1", model: "m", self: "A", authMode: "insecure" as const };
export const PORT = 9080;
export const url = (addr: string) => `http://${addr}:${PORT}`;

/** A fake world: address → what its hello says (undefined: unreachable); records membership changes. */
/** `holdHellos`: members hold every hello over their pools, answering none until `releaseHellos`. */
export function world(
  opts: { statics?: string[]; max?: number; intervalMs?: number; holdHellos?: boolean } = {},
) {
  const answers = new Map<
    string,
    { id: string; cluster?: string; model?: string; certId?: string; promptText?: boolean } | undefined
  >();
  const members = new Map<string, string>();
  /** What each admitted peer's hello said about prompt text (the runtime keeps it for forwards). */
  const promptText = new Map<string, boolean | undefined>();
  const log: string[] = [];
  /** Each member hello asked: the id and the DNS entry's own URL it was given. */
  const hellos: [string, string][] = [];
  /** Member hellos held (`holdHellos`), each answered once released. */
  const held: (() => void)[] = [];
  const ports: DnsMembershipPorts = {
    async probeHello(u) {
      const a = answers.get(u);
      if (!a) throw new Error("ECONNREFUSED");
      return { hello: { cluster: "c1", model: "m", protocol: PROTOCOL_VERSION, ...a }, certId: a.certId };
    },
    async hello(id, entryUrl) {
      hellos.push([id, entryUrl]);
      // What the address says when asked (a held hello answers for the process it reached).
      const u = members.get(id);
      const a = u === undefined ? undefined : answers.get(u);
      if (opts.holdHellos) await new Promise<void>((go) => held.push(go));
      if (!a) throw new Error("ECONNREFUSED");
      return { cluster: "c1", model: "m", protocol: PROTOCOL_VERSION, ...a };
    },
    hasPeer: (id) => members.has(id) || (opts.statics ?? []).includes(id),
    isStatic: (id) => (opts.statics ?? []).includes(id),
    addPeer(id, u, hello) {
      if (members.size >= (opts.max ?? 256)) return false;
      members.set(id, u);
      promptText.set(id, hello.promptText);
      log.push(`+${id}`);
      return true;
    },
    noteHello(id, hello) {
      promptText.set(id, hello.promptText);
    },
    movePeer(id, u) {
      members.set(id, u);
      log.push(`>${id}`);
    },
    removePeer(id) {
      members.delete(id);
      log.push(`-${id}`);
    },
  };
  let records: string[] = [];
  const dns = new DnsMembership({
    target: { host: "mesh", port: PORT },
    scheme: "http",
    resolver: async () => records,
    intervalMs: opts.intervalMs ?? 100,
    expect: EXPECT,
    ports,
    logger: quiet,
  });
  return {
    dns,
    answers,
    members,
    promptText,
    log,
    hellos,
    /** Answers the member hellos held so far, each with what its address said when asked. */
    releaseHellos: () => {
      for (const go of held.splice(0)) go();
    },
    setRecords: (r: string[]) => {
      records = r;
    },
  };
}

export const running: DnsMembership[] = [];

/** A fake world whose DNS name holds one address, 10.0.0.2, admitted as member B. */
export async function withMemberB(opts: Parameters<typeof world>[0] = {}) {
  const w = world(opts);
  running.push(w.dns);
  w.answers.set(url("10.0.0.2"), { id: "B" });
  w.setRecords(["10.0.0.2"]);
  await w.dns.start();
  await waitFor(() => w.members.has("B"), 5_000, "B admitted");
  return w;
}
